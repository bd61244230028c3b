const MIB = 1024 * 1024;

/**
 * What a client says when an answer is larger than it reads (the platform's transport, the shop
 * clients): "the answer passed 16 MiB, the most this client reads".
 */
export function answerTooLargeMessage(maxBytes: number): string {
  const size = maxBytes % MIB === 0 ? `${maxBytes / MIB} MiB` : `${Math.floor(maxBytes / 1024)} KiB`;
  return `the answer passed ${size}, the most this client reads`;
}
