import * as z from 'zod/mini';

/**
 * The affiliate platform's ids: programs, rules, partnerships, conversions and click ids are 24
 * hexadecimal characters. The sources' configuration, the platform client's requests and the
 * sandbox all check ids with this one rule, so it stands on the ground floor, below each of them.
 */
// The message on the check, not the schema: a schema's message would replace the other checks' too.
export const HexId = z.string().check(z.regex(/^[0-9a-f]{24}$/i, 'must be 24 hexadecimal characters'));
