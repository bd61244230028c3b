/**
 * Text a sender wrote, made fit to store, send on or show: no zod, no locale, so the lowest modules
 * (validation.ts) may use it without configuring zod for every program that loads them.
 */

const CONTROL_IN_TEXT_ALL = /(?![\t\n\r])\p{Cc}/gu;

/**
 * Text a shop wrote (a refund note, a cancel reason), made fit for `freeText(max)`: control
 * characters but tab and line breaks dropped, a lone surrogate replaced, cut to `max` without halving
 * a character. Such text only describes the change; refusing the delivery for it would lose the
 * refund or the order it came with, since the shop resends the same body until it gives up.
 */
export function shopText(value: string, max: number): string {
  const text = value.replace(CONTROL_IN_TEXT_ALL, '').toWellFormed();
  if (text.length <= max) return text;
  // A cut between the halves of a pair would leave a lone surrogate: cut before the pair instead.
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}
