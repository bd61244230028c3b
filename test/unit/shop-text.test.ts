import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { freeText } from '../../shared/domain/limits.ts';
import { shopText } from '../../shared/domain/text.ts';

describe('text a shop wrote, made fit for a free-text field', () => {
  it('cuts before a character it would halve', () => {
    const note = `${'a'.repeat(499)}😀 and more`;
    expect(shopText(note, 500)).toBe('a'.repeat(499));
    expect(shopText(`${'a'.repeat(498)}😀 and more`, 500)).toBe(`${'a'.repeat(498)}😀`);
  });

  it('drops control characters but tab and line breaks, and replaces a lone surrogate', () => {
    expect(shopText('one\u0001two\tthree\r\nfour\u007f', 500)).toBe('onetwo\tthree\r\nfour');
    expect(shopText('half \ud83d of it', 500)).toBe('half \ufffd of it');
  });

  it('gives the empty string for text that is all control characters', () => {
    expect(shopText('', 500)).toBe('');
    expect(shopText('\u0000\u0001', 500)).toBe('');
  });

  it('gives text the free-text check always accepts', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 700 }),
        fc.integer({ min: 1, max: 600 }),
        (text, max) => {
          const out = shopText(text, max);
          expect(freeText(max).safeParse(out).success).toBe(true);
          expect(out.length).toBeLessThanOrEqual(max);
        },
      ),
    );
  });
});
