import { describe, expect, it } from 'vitest';
import { FINANCE_KEY, postToRefundsHandler } from '../support/finance-door.ts';

/**
 * `POST /refunds` naming a source the deployment does not have: the 400 names `source` and quotes
 * what was sent as the webhook door quotes a sender's text (`quoted`): on one line, without control
 * characters (an escape sequence would repaint the terminal reading the answer or the log), with
 * bidirectional controls as `\u202e` escapes, cut with an ellipsis.
 */
describe('POST /refunds with an unknown source', () => {
  it('quotes the source without control characters and with bidi controls escaped', async () => {
    // Act
    const { result, queue } = await postToRefundsHandler(
      { 'x-api-key': FINANCE_KEY },
      { externalId: '1001', refundId: 'RF-1', amountCents: 1_000, source: '\u001b[2J\r\nshop\u202eyfipohs' },
    );

    // Assess
    const body = JSON.parse(String(result.body)) as { field?: string; message?: string };
    expect({ status: result.statusCode, field: body.field, queued: queue.events.length }).toEqual({
      status: 400,
      field: 'source',
      queued: 0,
    });
    expect(body.message).toBe('unknown source "[2J shop\\u202eyfipohs"');
  });
});
