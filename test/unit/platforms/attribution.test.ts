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
      'skip',
    );
    // Assess
    expect(result).toEqual({ attribution: { clickIds: [] }, skippedFields: [] });
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
    const result = extractAttribution(entries, names, 'skip');
    // Assess: a value that is no text is no click id, not an invalid one
    expect(result).toEqual({ attribution: { clickIds: ['a1', 'a2', 'a3', 'a4', 'a5'] }, skippedFields: [] });
  });

  it('tolerates landing URLs it cannot read', () => {
    // Act / Assess
    expect(urlQueryEntries('http://[bad', 'landing_site')).toEqual([]);
    expect(urlQueryEntries(null, 'landing_site')).toEqual([]);
    expect(urlQueryEntries('https://shop.example/?aecid=z', 'landing_site')).toEqual([
      { name: 'aecid', value: 'z', field: 'landing_site' },
    ]);
  });

  it('reads the first non-blank tracking id and subId', () => {
    // Prepare
    const entries = recordEntries(
      { affiliate_tracking_id: ' ', subid: '', SubId: 'b', _affiliate_tracking_id: 42 },
      'm',
    );
    // Act
    const result = extractAttribution(entries, names, 'skip');
    // Assess: a blank value is absent, not skipped
    expect(result).toEqual({
      attribution: { clickIds: [], affiliateTrackingId: 42, subId: 'b' },
      skippedFields: [],
    });
  });

  it.each(['12a', '-3', '0', '1.5', '99999999999999999', 'AF1001'])(
    'skips tracking id %j, reporting its field, or rejects it naming the field',
    (value) => {
      // Prepare
      const entries = keyValueEntries([{ key: 'x' }, { key: 'affiliate_tracking_id', value }], 'meta_data');
      // Act
      const skipped = extractAttribution(entries, names, 'skip');
      const error = thrown(() => extractAttribution(entries, names, 'reject'));
      // Assess
      expect(skipped).toEqual({ attribution: { clickIds: [] }, skippedFields: ['meta_data.1.value'] });
      expect(error).toBeInstanceOf(BadInputError);
      expect(error.field).toBe('meta_data.1.value');
    },
  );

  it('takes the first valid tracking id when skipping, the first non-blank one when rejecting', () => {
    // Prepare
    const entries = [
      ...nameValueEntries([{ name: 'affiliate_tracking_id', value: 'AF1001' }], 'note_attributes'),
      ...urlQueryEntries('/?affiliate_tracking_id=7&affiliate_tracking_id=x', 'landing_site'),
    ];
    // Act
    const skipped = extractAttribution(entries, names, 'skip');
    const error = thrown(() => extractAttribution(entries, names, 'reject'));
    // Assess: every invalid candidate is reported, each field once
    expect(skipped).toEqual({
      attribution: { clickIds: [], affiliateTrackingId: 7 },
      skippedFields: ['note_attributes.0.value', 'landing_site'],
    });
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('note_attributes.0.value');
  });

  it('skips click ids and subIds the event would refuse, or passes them on to its check', () => {
    // Prepare: over the 256-character limit, a control character, a lone surrogate
    const long = 'a'.repeat(257);
    const entries = [
      ...nameValueEntries(
        [
          { name: 'aecid', value: `${long}, ok1` },
          { name: 'subid', value: 'bad\u0001' },
          { name: 'aecid', value: '\ud83d' },
        ],
        'note_attributes',
      ),
      ...urlQueryEntries(`/?aecid=%01&aecid=ok2&subid=${long}&subid=s1`, 'landing_site'),
    ];
    const junkOnly = urlQueryEntries(`/?aecid=${long}&subid=%7F`, 'landing_site');
    // Act
    const skipped = extractAttribution(entries, names, 'skip');
    const none = extractAttribution(junkOnly, names, 'skip');
    const passed = extractAttribution(entries, names, 'reject');
    // Assess
    expect(skipped).toEqual({
      attribution: { clickIds: ['ok1', 'ok2'], subId: 's1' },
      skippedFields: [
        'note_attributes.0.value',
        'note_attributes.1.value',
        'note_attributes.2.value',
        'landing_site',
      ],
    });
    expect(none).toEqual({ attribution: { clickIds: [] }, skippedFields: ['landing_site'] });
    expect(passed).toEqual({
      attribution: { clickIds: [long, 'ok1', '\ud83d', '\u0001', 'ok2'], subId: 'bad\u0001' },
      skippedFields: [],
    });
  });

  it('takes the first valid IP from the IP attributes', () => {
    // Act / Assess
    expect(attributeIp(recordEntries({ ip: 'unknown', buyer_ip: '2001:db8::1' }, 'm'))).toBe('2001:db8::1');
    expect(attributeIp(recordEntries({ ip: 'fe80::1%eth0', buyer_ip: '192.0.2.9' }, 'm'))).toBe('192.0.2.9');
    expect(attributeIp(recordEntries({ other: '192.0.2.1' }, 'm'))).toBeUndefined();
  });
});
