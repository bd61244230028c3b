import { describe, expect, it } from 'vitest';
import { answerTooLargeMessage, redirectTarget } from '../../shared/http/client-answers.ts';

describe('what the HTTP clients say of answers they do not take', () => {
  it('names a cap in MiB when it is whole MiB, else in KiB', () => {
    // Act / Assess
    expect(answerTooLargeMessage(16 * 1024 * 1024)).toBe(
      'the answer passed 16 MiB, the most this client reads',
    );
    expect(answerTooLargeMessage(1536)).toBe('the answer passed 1 KiB, the most this client reads');
  });

  it('names where a redirect points, resolved against the request, without its query or fragment', () => {
    // Act / Assess
    expect(redirectTarget('https://shop.example/admin/x', '/moved/y?token=t#f')).toBe(
      'a redirect to https://shop.example/moved/y',
    );
    expect(redirectTarget(new URL('http://a.example/'), 'https://b.example/api?key=k')).toBe(
      'a redirect to https://b.example/api',
    );
  });

  it('quotes no address that is not http(s), none that is not a URL, and at most 200 characters of a path', () => {
    // Act / Assess
    expect(redirectTarget('https://a.example/', 'data:text/plain,SECRET')).toBe(
      'a redirect to an address that is not http(s)',
    );
    expect(redirectTarget('https://a.example/', 'http://[::1')).toBe(
      'a redirect to an address that is not a URL',
    );
    expect(redirectTarget('https://a.example/', null)).toBe('a redirect without a Location');
    const long = redirectTarget('https://a.example/', `/${'p'.repeat(500)}`);
    expect(long).toBe(`a redirect to https://a.example/${'p'.repeat(199)}…`);
  });
});
