import type * as z from 'zod/mini';
import { displayed } from './domain/text.ts';

/** A zod issue as the connector reports it: the dotted path of the field, and what is wrong with it. */
export interface FieldIssue {
  /** `line_items.0.price`; empty when the value itself (the root) is wrong. */
  readonly field: string;
  readonly message: string;
  /** Zod's issue code (`unrecognized_keys`, `custom`…), for callers that word some issues their own way. */
  readonly code: z.core.$ZodIssue['code'];
}

/**
 * Every issue of a zod error as "field: message", one per unknown key. Zod reports the unknown keys
 * of a strict object on the parent: each is named itself, under its parent, so the answer points at
 * the misspelt key rather than at the object that holds it.
 *
 * @param prefix put before every path (`body`, or the name of a nested payload)
 */
export function issuesOf(error: z.core.$ZodError, prefix = ''): FieldIssue[] {
  return error.issues.flatMap((issue): FieldIssue[] => {
    const path = [prefix, ...issue.path.map(String)].filter((p) => p !== '').join('.');
    if (issue.code !== 'unrecognized_keys')
      return [{ field: path, message: issue.message, code: issue.code }];
    return issue.keys.map((key) => {
      const shown = keyShown(key);
      return {
        field: path ? `${path}.${shown}` : shown,
        message: `${shown} is not allowed here`,
        code: issue.code,
      };
    });
  });
}

/** The most characters of an unknown key an answer or a log line names. */
const MAX_KEY_SHOWN = 64;

/**
 * An unknown key as the answer names it: the sender wrote it, so `displayed` (on one line, without
 * control characters, bidirectional controls as `\u202e` escapes, cut with an ellipsis: a body may
 * hold a megabyte-long key).
 */
function keyShown(key: string): string {
  return displayed(key, MAX_KEY_SHOWN);
}

/** The first issue of a zod error (see `issuesOf`), for "400 naming the field". */
export function firstIssue(error: z.core.$ZodError, prefix = ''): FieldIssue {
  return issuesOf(error, prefix)[0] ?? { field: prefix, message: 'invalid', code: 'custom' };
}
