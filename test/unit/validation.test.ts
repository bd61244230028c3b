import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { parseSources } from '../../shared/config/sources.ts';
import { ConfigurationError, failureClassOf } from '../../shared/errors.ts';
import { firstIssue, issuesOf } from '../../shared/validation.ts';

/** "400 naming the field": the first zod issue as a dotted path, written once for every caller. */

const Order = z.strictObject({
  id: z.string(),
  line_items: z.array(z.strictObject({ price: z.string() })),
});

describe('firstIssue', () => {
  it('names a nested field as a dotted path', () => {
    // Act
    const parsed = Order.safeParse({ id: '1', line_items: [{ price: 3 }] });

    // Assess
    expect(parsed.success).toBe(false);
    expect(firstIssue(parsed.error!)).toEqual({
      field: 'line_items.0.price',
      message: expect.any(String),
      code: 'invalid_type',
    });
  });

  it('names an unknown key itself, under its parent, rather than the parent', () => {
    // Act
    const parsed = Order.safeParse({ id: '1', line_items: [{ price: '1', cost: '2' }] });

    // Assess
    expect(firstIssue(parsed.error!)).toEqual({
      field: 'line_items.0.cost',
      message: 'cost is not allowed here',
      code: 'unrecognized_keys',
    });
  });

  it('puts a prefix before the path, and gives an empty field for the root', () => {
    // Act
    const nested = z.strictObject({ a: z.number() }).safeParse({ a: 'x' });
    const root = z.string().safeParse(1);

    // Assess
    expect(firstIssue(nested.error!, 'body').field).toBe('body.a');
    expect(firstIssue(root.error!).field).toBe('');
  });

  it('lists every issue, one per unknown key', () => {
    // Act
    const parsed = z.strictObject({ a: z.string() }).safeParse({ a: 1, x: 1, y: 2 });

    // Assess
    expect(issuesOf(parsed.error!).map((i) => i.field)).toEqual(['a', 'x', 'y']);
  });
});

describe('a sources file with a misspelt setting', () => {
  it('names the setting, not only the source that holds it', () => {
    // Prepare
    const json = JSON.stringify([
      {
        id: 'shop',
        platform: 'shopify',
        program: '0123456789abcdef01234567',
        rule: '76543210fedcba9876543210',
        secretRef: 'SHOP_SECRET',
        orderTopc: 'orders/paid',
      },
    ]);

    // Act + Assess
    expect(() => parseSources(json, 'sources.json')).toThrow(
      'sources.json: 0.orderTopc: orderTopc is not allowed here',
    );
  });
});

describe('acceptAfterDays of a source', () => {
  const source = (acceptAfterDays?: unknown) =>
    JSON.stringify([
      {
        id: 'shop',
        platform: 'generic',
        program: '0123456789abcdef01234567',
        rule: '76543210fedcba9876543210',
        secretRef: 'SHOP_SECRET',
        ...(acceptAfterDays === undefined ? {} : { acceptAfterDays }),
      },
    ]);

  it('is off unless set, and takes whole days from 1 to 365', () => {
    expect(parseSources(source(), 's.json')[0]?.acceptAfterDays).toBeUndefined();
    expect(parseSources(source(30), 's.json')[0]?.acceptAfterDays).toBe(30);
    expect(parseSources(source(365), 's.json')[0]?.acceptAfterDays).toBe(365);
  });

  it.each([0, -1, 366, 1.5, '30'])('refuses %j naming the setting', (value) => {
    expect(() => parseSources(source(value), 's.json')).toThrow(/^s\.json: 0\.acceptAfterDays: /);
  });
});

describe('a wrong SOURCES setting', () => {
  // A function's wiring reads SOURCES at cold start: what it throws is a configuration error an
  // operator must fix, described in full (not quoted as a foreign message, not classed transient).
  it.each([
    ['not JSON', '[{'],
    ['a wrong field', '[{"id":"s"}]'],
  ])('is a ConfigurationError naming the setting (%s)', (_what, json) => {
    let thrown: unknown;
    try {
      parseSources(json, 'setting SOURCES');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigurationError);
    expect(failureClassOf(thrown)).toBe('configuration');
    expect((thrown as Error).message).toMatch(/^setting SOURCES: /);
  });
});
