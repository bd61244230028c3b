import { describe, expect, it } from 'vitest';
import { BadInputError } from '../../../shared/errors.ts';
import {
  attributeIp,
  extractAttribution,
  keyValueEntries,
  nameValueEntries,
  recordEntries,
  urlQueryEntries,
} from '../../../shared/platforms/attribution.ts';
import { sourceOf, thrown } from './support.ts';

const names = sourceOf('shopify');

describe('attribution', () => {
  it('returns nothing from a payload without tracking data', () => {
    // Act
    const result = extractAttribution(
      nameValueEntries([{ name: 'colour', value: 'green' }], 'note_attributes'),
      names,
    );
    // Assess
    expect(result).toEqual({ clickIds: [] });
  });

  it('collects click ids from every source, split on commas and spaces, without duplicates', () => {
    // Prepare
    const entries = [
      ...nameValueEntries(
        [{ name: 'AECID', value: ' a1, a2 a1 ' }, { name: 'x' }, null, 'junk'],
        'note_attributes',
      ),
      ...keyValueEntries(
        [
          { key: '_aecid', value: 'a3' },
          { key: 'aecid', value: { nested: true } },
        ],
        'meta_data',
      ),
      ...recordEntries({ aecid: 'a2' }, 'metadata'),
      ...urlQueryEntries('/products/x?aecid=a4&aecid=a5&utm=1', 'landing_site'),
    ];
    // Act
    const result = extractAttribution(entries, names);
    // Assess
    expect(result.clickIds).toEqual(['a1', 'a2', 'a3', 'a4', 'a5']);
  });

  it('tolerates landing URLs it cannot read', () => {
    // Act / Assess
    expect(urlQueryEntries('http://[bad', 'landing_site')).toEqual([]);
    expect(urlQueryEntries(null, 'landing_site')).toEqual([]);
    expect(urlQueryEntries('https://shop.example/?aecid=z', 'landing_site')).toEqual([
      { name: 'aecid', value: 'z', field: 'landing_site', buyerWritten: true },
    ]);
  });

  it('reads the first non-blank tracking id and subId', () => {
    // Prepare
    const entries = recordEntries(
      { affiliate_tracking_id: ' ', subid: '', SubId: 'b', _affiliate_tracking_id: 42 },
      'm',
    );
    // Act
    const result = extractAttribution(entries, names);
    // Assess
    expect(result).toEqual({ clickIds: [], affiliateTrackingId: 42, subId: 'b' });
  });

  it.each(['12a', '-3', '0', '1.5', '99999999999999999'])(
    'rejects tracking id %j naming the field',
    (value) => {
      // Prepare
      const entries = keyValueEntries([{ key: 'x' }, { key: 'affiliate_tracking_id', value }], 'meta_data');
      // Act
      const error = thrown(() => extractAttribution(entries, names));
      // Assess
      expect(error).toBeInstanceOf(BadInputError);
      expect(error.field).toBe('meta_data.1.value');
    },
  );

  it('skips a buyer-written tracking id that is not one, but not a shop-written one', () => {
    // Prepare: a landing URL is the buyer's (or a bot's) to write, an attribute is the shop's
    const fromUrl = urlQueryEntries('/?affiliate_tracking_id=AF1001&affiliate_tracking_id=7', 'landing_site');
    const junkOnly = urlQueryEntries('/?affiliate_tracking_id=AF1001', 'landing_site');
    const fromShop = [
      ...nameValueEntries([{ name: 'affiliate_tracking_id', value: 'AF1001' }], 'note_attributes'),
      ...fromUrl,
    ];
    // Act
    const skipped = extractAttribution(fromUrl, names);
    const none = extractAttribution(junkOnly, names);
    const error = thrown(() => extractAttribution(fromShop, names));
    // Assess
    expect(skipped).toEqual({ clickIds: [], affiliateTrackingId: 7 });
    expect(none).toEqual({ clickIds: [] });
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('note_attributes.0.value');
  });

  it('skips buyer-written click ids and subIds the event would refuse, but passes shop-written ones on', () => {
    // Prepare: over the 256-character limit, a control character; a landing URL is the buyer's (or
    // a bot's) to write, an attribute is the shop's (the event check answers 400 for it, naming it)
    const long = 'a'.repeat(257);
    const fromUrl = urlQueryEntries(
      `/?aecid=${long},ok1&aecid=%01&aecid=ok2&subid=${long}&subid=bad%00&subid=s1`,
      'landing_site',
    );
    const junkOnly = urlQueryEntries(`/?aecid=${long}&subid=%7F`, 'landing_site');
    const fromShop = nameValueEntries(
      [
        { name: 'aecid', value: long },
        { name: 'subid', value: long },
      ],
      'note_attributes',
    );
    // Act
    const skipped = extractAttribution(fromUrl, names);
    const none = extractAttribution(junkOnly, names);
    const passed = extractAttribution([...fromShop, ...fromUrl], names);
    // Assess
    expect(skipped).toEqual({ clickIds: ['ok1', 'ok2'], subId: 's1' });
    expect(none).toEqual({ clickIds: [] });
    expect(passed).toEqual({ clickIds: [long, 'ok1', 'ok2'], subId: long });
  });

  it('takes the first valid IP from the IP attributes', () => {
    // Act / Assess
    expect(attributeIp(recordEntries({ ip: 'unknown', buyer_ip: '2001:db8::1' }, 'm'))).toBe('2001:db8::1');
    expect(attributeIp(recordEntries({ ip: 'fe80::1%eth0', buyer_ip: '192.0.2.9' }, 'm'))).toBe('192.0.2.9');
    expect(attributeIp(recordEntries({ other: '192.0.2.1' }, 'm'))).toBeUndefined();
  });
});
