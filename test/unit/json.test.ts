import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BadInputError } from '../../shared/errors.ts';
import { parseJsonBody } from '../../shared/json.ts';

describe('parseJsonBody', () => {
  it('keeps integers beyond 2^53 exact, as their source text', () => {
    // Prepare: 2^53 + 1 cannot be a JS number
    const raw = Buffer.from('{"id":9007199254740993,"ids":[18446744073709551615,-9007199254740993]}');
    // Act
    const body = parseJsonBody(raw) as { id: unknown; ids: unknown[] };
    // Assess
    expect(JSON.parse(raw.toString()).id).toBe(9007199254740992);
    expect(body.id).toBe('9007199254740993');
    expect(body.ids).toEqual(['18446744073709551615', '-9007199254740993']);
  });

  it('leaves safe numbers, fractions and strings alone', () => {
    // Act
    const body = parseJsonBody(
      Buffer.from('{"id":450789469,"rate":0.06,"price":"199.00","max":9007199254740991}'),
    );
    // Assess
    expect(body).toEqual({ id: 450789469, rate: 0.06, price: '199.00', max: Number.MAX_SAFE_INTEGER });
  });

  it('reads any integer, safe or not, in any position: numbers when safe, their text when not', () => {
    // Around 2^53 (16 digits, the shortest unsafe integers) as often as anywhere else.
    const integer = fc.oneof(
      fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
      fc.bigInt({ min: 2n ** 53n - 10n, max: 10n ** 16n - 1n }),
      fc.bigInt({ min: -(10n ** 16n) + 1n, max: -(2n ** 53n) + 10n }),
      fc.bigInt({ min: -(10n ** 6n), max: 10n ** 6n }),
    );
    fc.assert(
      fc.property(fc.array(integer), fc.string(), (ints, note) => {
        const raw = Buffer.from(`{"note":${JSON.stringify(note)},"ints":[${ints.join(',')}]}`);

        const body = parseJsonBody(raw) as { note: string; ints: unknown[] };

        expect(body.note).toBe(note);
        expect(body.ints).toEqual(
          ints.map((i) => (Number.isSafeInteger(Number(i)) ? Number(i) : i.toString())),
        );
      }),
    );
  });

  it('ignores a UTF-8 byte order mark', () => {
    // Act / Assess
    expect(parseJsonBody(Buffer.from('\ufeff{"a":1}'))).toEqual({ a: 1 });
  });

  it.each(['', '{', '{"a":1,}', 'webhook_id=3', "{'a':1}", 'NaN'])(
    'throws BadInputError on %j without quoting the body',
    (text) => {
      // Act
      let error: unknown;
      try {
        parseJsonBody(Buffer.from(text));
      } catch (e) {
        error = e;
      }
      // Assess
      expect(error).toBeInstanceOf(BadInputError);
      expect((error as BadInputError).field).toBe('body');
      expect((error as BadInputError).message).toBe('request body is not valid JSON');
    },
  );
});
