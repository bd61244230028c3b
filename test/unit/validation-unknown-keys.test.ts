import { describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import { issuesOf } from '../../shared/validation.ts';

/**
 * An unknown key is the sender's text: the 400 that names it, and the log line that quotes the
 * answer, must not carry a megabyte of it, nor its control characters (a forged log line).
 */
describe('an unknown key in a strict object', () => {
  it('is named cut short and printable, in the field and the message', () => {
    // Prepare
    const Body = z.strictObject({ amount: z.string() });
    const key = `\u001b[31mx${'k'.repeat(10_000)}`;
    const parsed = Body.safeParse({ amount: '1.00', [key]: 1 });

    // Act
    const [issue] = parsed.success ? [] : issuesOf(parsed.error, 'body');

    // Assess
    expect(issue?.field.length).toBeLessThan(120);
    expect(issue?.message.length).toBeLessThan(160);
    const control = [...`${issue?.field}${issue?.message}`].filter((c) => c < ' ' || c === '\u007f');
    expect(control).toEqual([]);
    expect(issue?.field).toMatch(/^body\.\[31mxk+…$/);
    expect(issue?.message).toMatch(/is not allowed here$/);
  });

  it('is named whole when it is short, as before', () => {
    // Prepare
    const Body = z.strictObject({ amount: z.string() });
    const parsed = Body.safeParse({ amount: '1.00', amountt: '2.00' });

    // Act
    const issues = parsed.success ? [] : issuesOf(parsed.error, 'body');

    // Assess
    expect(issues).toEqual([
      { field: 'body.amountt', message: 'amountt is not allowed here', code: 'unrecognized_keys' },
    ]);
  });
});
