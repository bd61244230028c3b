import { describe, expect, it } from 'vitest';
import { type IngestOutcome, ingestWebhook } from '../../../shared/ingest.ts';
import { adapterFor } from '../../../shared/platforms/registry.ts';
import { EnvSecretStore } from '../../../shared/secrets.ts';
import { RecordingQueue } from '../../support/recording-queue.ts';
import { signedHeaders } from '../../support/webhooks.ts';
import { SECRET, sampleJson, sourceOf } from './support.ts';

const ORDER = 'shopify/order_2026-07_docs_example.json';
const source = sourceOf('shopify', { secretRef: 'SHOPIFY_SECRET' });
const secrets = new EnvSecretStore({ SHOPIFY_SECRET: SECRET });

/** Posts a Shopify order with these cart attributes through the webhook door, as the Lambda does. */
async function postOrder(noteAttributes: unknown[]) {
  const rawBody = Buffer.from(JSON.stringify({ ...sampleJson(ORDER), note_attributes: noteAttributes }));
  const queue = new RecordingQueue();
  const outcomes: IngestOutcome[] = [];
  const answer = await ingestWebhook(
    {
      sources: new Map([[source.id, source]]),
      adapterFor,
      secrets,
      queue,
      now: () => new Date(),
      observe: (outcome) => outcomes.push(outcome),
    },
    source.id,
    { headers: signedHeaders('shopify', SECRET, rawBody), rawBody },
  );
  return { answer, events: queue.events, outcome: outcomes[0] };
}

/** What a buyer can put in a cart attribute: nothing of it may reach a log line. */
const JUNK = `<script>alert(1)</script>\u0001${'x'.repeat(300)}`;

describe('attribute values skipped at the webhook door', () => {
  it('queues the order and tells the observer the skipped field, never the value', async () => {
    // Act
    const { answer, events, outcome } = await postOrder([
      { name: 'aecid', value: JUNK },
      { name: 'aecid', value: 'aaaaaaaaaaaaaaaaaaaaaaaa' },
    ]);
    // Assess
    expect(answer.status).toBe(202);
    expect(events).toMatchObject([{ type: 'OrderPlaced', clickIds: ['aaaaaaaaaaaaaaaaaaaaaaaa'] }]);
    expect(outcome).toMatchObject({
      status: 202,
      result: 'queued',
      detail: 'skipped invalid attributes: note_attributes.0.value',
    });
    expect(JSON.stringify(outcome)).not.toContain('script');
  });

  it('names at most ten skipped fields and counts the rest', async () => {
    // Act
    const { answer, outcome } = await postOrder(
      Array.from({ length: 12 }, () => ({ name: 'affiliate_tracking_id', value: 'AF1001' })),
    );
    // Assess
    expect(answer.status).toBe(202);
    const named = Array.from({ length: 10 }, (_, i) => `note_attributes.${i}.value`).join(', ');
    expect(outcome?.detail).toBe(`skipped invalid attributes: ${named} (+2 more)`);
  });

  it('adds no detail when nothing was skipped', async () => {
    // Act
    const { answer, outcome } = await postOrder([{ name: 'aecid', value: 'aaaaaaaaaaaaaaaaaaaaaaaa' }]);
    // Assess
    expect(answer.status).toBe(202);
    expect(outcome).toMatchObject({ status: 202, result: 'queued' });
    expect(outcome?.detail).toBeUndefined();
  });
});
