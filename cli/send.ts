import { Argument, type Command, Option } from 'commander';
import { LOCAL_SECRETS } from '../local/defaults.ts';
import type { SourceConfig } from '../shared/config/sources.ts';
import { isRedirect, redirectRefusal } from '../shared/http/client-answers.ts';
import { parseJsonBody } from '../shared/json.ts';
import { CliContext, settingOptions } from './context.ts';
import { CliError, type CliIo, explain, nowOf, terminalJson, writeLine } from './io.ts';
import {
  applyChanges,
  checkChanges,
  defaultTopic,
  findSample,
  freshEventId,
  isOrderBody,
  PLATFORMS,
  type Platform,
  readBodyFile,
  SAMPLE_KINDS,
  type SampleChanges,
  type SampleKind,
  samplePath,
  samplesHelp,
  signedHeaders,
} from './samples.ts';

interface SendOptions {
  source?: string;
  sample?: SampleKind;
  topic?: string;
  file?: string;
  clickId?: string;
  ip?: string;
  trackingId?: number;
  orderId?: string;
  eventId?: string;
  secret?: string;
}

const EXAMPLES = `
Examples:
  # a Shopify order attributed to an affiliate click, signed with the local secret
  $ npx connector send shopify --click-id 0123456789abcdef01234567 --ip 203.0.113.7
  # several orders: give each its own id
  $ npx connector send woocommerce --order-id 1002 --click-id 0123456789abcdef01234567 --ip 203.0.113.7
  # a manual-mode conversion (affiliate tracking id instead of a click)
  $ npx connector send generic --order-id A-17 --tracking-id 1001
  # the life of one order: order, partial refund, the rest refunded (see the samples below)
  $ npx connector send stripe --order-id A-1 --click-id 0123456789abcdef01234567 --ip 203.0.113.7
  $ npx connector send stripe --order-id A-1 --sample partial-refund
  $ npx connector send stripe --order-id A-1 --sample full-refund
  # a body of your own, signed like the platform would
  $ npx connector send stripe --file ./my-event.json --secret "$STRIPE_WEBHOOK_SECRET" --url https://abc.execute-api.eu-west-1.amazonaws.com

Built-in samples (--sample, or --topic alone). The samples of a platform are one order, so they
can be sent one after another; --order-id moves them all to another order. CONVERSION is the
order's conversion on the platform once the sample is sent after the order (a full-refund after the
partial-refund): its amount without tax and shipping, as the connector sends it, not the shop's total.
${samplesHelp()}

Samples are the platforms' documentation examples (test/fixtures/samples/). The signing secret is
--secret, else the source's secret (env <PLATFORM>_WEBHOOK_SECRET, or .local-stack.json), else, for
a connector on this machine, the documented local default.`;

/** Where a platform's delivery carries what `send` is told. */
interface DeliveryShape {
  /** `--event-id`: in the body (Stripe's event id, Generic's `eventId`) or in a delivery header. */
  readonly eventId: 'body' | 'header';
  /**
   * The topic: in a header (Shopify, WooCommerce), as the event's `type` in the body (Stripe), or
   * `own`: the body carries its own type, no topic is sent, and `--topic` only picks a sample (`own`
   * says why it does not go with `--file`).
   */
  readonly topic: 'header' | 'type' | { readonly own: string };
}

/** Per platform: a record, so a new platform must say. */
const DELIVERY_SHAPE: Readonly<Record<Platform, DeliveryShape>> = {
  shopify: { eventId: 'header', topic: 'header' },
  woocommerce: { eventId: 'header', topic: 'header' },
  stripe: { eventId: 'body', topic: 'type' },
  generic: {
    eventId: 'body',
    topic: { own: 'a Generic body carries its own type ("order", "refund", "cancel")' },
  },
};

/** `connector send <platform>`: a signed sample webhook, posted to the connector. */
export function registerSend(program: Command, io: CliIo): void {
  const command = program
    .command('send')
    .summary('send a signed sample webhook (Shopify, WooCommerce, Stripe, Generic)')
    .description(
      'Signs a sample webhook exactly like the shop platform does, POSTs it to <url>/webhooks/<source> ' +
        'and prints the HTTP status and the JSON answer. Exit code 0 on a 2xx answer, 1 otherwise.',
    )
    .addArgument(new Argument('<platform>', 'shop platform').choices(PLATFORMS))
    .option('--source <id>', 'source id in the webhook URL (default: the platform name)')
    .addOption(
      new Option('--sample <kind>', 'which built-in sample: an order, a refund or a cancellation').choices(
        SAMPLE_KINDS,
      ),
    )
    .option(
      '--topic <topic>',
      'Shopify topic (orders/create, orders/paid, refunds/create, orders/cancelled), WooCommerce topic ' +
        '(order.created, order.updated), Stripe event type (checkout.session.completed, charge.refunded, ' +
        "refund.created) or Generic type (order, refund, cancel); default: the sample's",
    )
    .option('--file <json>', 'send this body instead of the sample')
    .option('--click-id <24hex>', 'affiliate click id (aecid), put where the platform carries it')
    .option('--ip <addr>', "buyer's IP address")
    .option('--tracking-id <n>', 'affiliate tracking id (manual mode)', (v) => Number(v))
    .option('--order-id <id>', 'replace the order id, to send several orders')
    .option('--event-id <id>', 'delivery/event id (default: a fresh one per send)')
    .option('--secret <secret>', 'webhook signing secret (default: see below)');
  settingOptions(command, ['connectorUrl']);
  command.addHelpText('after', EXAMPLES).action(async (platform: Platform, options: SendOptions) => {
    const ctx = new CliContext(io, options);
    try {
      await send(ctx, platform, options);
    } finally {
      ctx.close();
    }
  });
}

async function send(ctx: CliContext, platform: Platform, options: SendOptions): Promise<void> {
  const { io } = ctx;
  const sourceId = options.source ?? platform;
  const source = ctx.sources().find((s) => s.id === sourceId);
  if (source && source.platform !== platform) {
    throw new CliError(`--source: ${sourceId} is a ${source.platform} source, not ${platform}`);
  }
  if (options.file && options.sample) throw new CliError('--sample and --file: choose one');
  const shape = DELIVERY_SHAPE[platform];
  if (options.file && typeof shape.topic === 'object' && options.topic !== undefined) {
    throw new CliError(`--topic: ${shape.topic.own}`);
  }
  const sample = options.file ? undefined : findSample(platform, options.sample, options.topic);
  if (!options.file && !sample) {
    const what = [options.sample, options.topic].filter(Boolean).join(' / ');
    throw new CliError(
      `${options.topic === undefined ? '--sample' : '--topic'}: no built-in ${platform} sample for ${what} ` +
        `(see connector send --help for the list), or give a body with --file`,
    );
  }
  const topic =
    typeof shape.topic === 'object'
      ? undefined
      : (options.topic ??
        (sample?.kind === 'order' || !sample ? defaultTopic(platform, source) : sample.topic));
  const changes: SampleChanges = {
    clickId: options.clickId,
    ip: options.ip,
    trackingId: options.trackingId,
    orderId: options.orderId,
    eventId: shape.eventId === 'body' ? options.eventId : undefined,
    clickIdAttribute: source?.clickIdAttributes[0] ?? 'aecid',
    trackingIdAttribute: source?.trackingIdAttributes[0] ?? 'affiliate_tracking_id',
  };
  checkChanges({
    ...changes,
    deliveryId: shape.eventId === 'header' ? options.eventId : undefined,
  });

  let raw: string;
  if (options.file) {
    raw = readBodyFile(options.file, '--file');
  } else {
    raw = readBodyFile(samplePath(sample as NonNullable<typeof sample>), 'sample');
  }
  const changed = [changes.clickId, changes.ip, changes.trackingId, changes.orderId, changes.eventId].some(
    (v) => v !== undefined,
  );
  // A file of one's own goes out byte for byte unless a flag changes it.
  let body = raw;
  if (!options.file || changed) {
    let json: unknown;
    try {
      json = parseJsonBody(Buffer.from(raw));
    } catch {
      throw new CliError(`--file: ${options.file} is not valid JSON`);
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) {
      throw new CliError(`--file: ${options.file} is not a JSON object`);
    }
    const input = json as Record<string, unknown>;
    if (!options.file && shape.topic === 'type' && topic) input['type'] = topic;
    const withEventId = {
      ...changes,
      eventId: changes.eventId ?? (options.file ? undefined : freshEventId(platform)),
    };
    const tracking = [changes.clickId, changes.ip, changes.trackingId].some((v) => v !== undefined);
    if (tracking && !isOrderBody(platform, topic, input)) {
      writeLine(
        io.stderr,
        'note: --click-id, --ip and --tracking-id apply to orders only; ignored for this body',
      );
    }
    body = JSON.stringify(applyChanges(platform, topic, input, withEventId));
  }

  const url = ctx.require('connectorUrl').replace(/\/+$/, '');
  const secret = await signingSecret(ctx, platform, sourceId, source, options.secret, url);
  const headers = signedHeaders(platform, body, secret, {
    topic,
    eventId: shape.eventId === 'header' ? options.eventId : undefined,
    now: nowOf(io),
  });
  const target = `${url}/webhooks/${encodeURIComponent(sourceId)}`;
  writeLine(io.stderr, `POST ${target}  (${platform}${topic ? ` ${topic}` : ''})`);

  let response: Response;
  try {
    // biome-ignore lint/style/noRestrictedGlobals: bounded by its AbortSignal.timeout
    response = await fetch(target, {
      method: 'POST',
      headers,
      body,
      // A redirect would carry the signed body wherever it points, a delivery anyone there could resend.
      redirect: 'manual',
      signal: AbortSignal.timeout(15_000),
    });
  } catch (error) {
    throw new CliError(
      `could not reach ${target}: ${explain(error)}. Is the connector running (npm start)?`,
      1,
    );
  }
  if (isRedirect(response.status)) {
    await response.body?.cancel();
    const fix = { setting: 'CONNECTOR_URL (or --url)', what: 'the connector', carries: 'the signed webhook' };
    throw new CliError(
      `${target} ${redirectRefusal(response.status, target, response.headers.get('location'), fix)}`,
      1,
    );
  }
  const text = await response.text();
  writeLine(io.stdout, `HTTP ${response.status}`);
  writeLine(io.stdout, pretty(text));
  if (!response.ok) throw new CliError('', 1);
}

function pretty(text: string): string {
  try {
    return terminalJson(JSON.parse(text));
  } catch {
    return text;
  }
}

/**
 * `--secret`, else the source's secret by its reference (env, then .local-stack.json), else the
 * local stack's documented default when the connector runs on this machine (printed: it is public).
 */
async function signingSecret(
  ctx: CliContext,
  platform: Platform,
  sourceId: string,
  source: SourceConfig | undefined,
  flag: string | undefined,
  url: string,
): Promise<string> {
  // A secret is signed with whole: commas, spaces and brackets are part of it.
  // A signature made with a real shop's secret is as good as the secret to whoever receives it.
  if (flag !== undefined) {
    if (flag === '') throw new CliError('--secret: empty');
    ctx.checkDestination('connectorUrl', '--secret', 'flag');
    return flag;
  }
  const ref = source?.secretRef ?? `${platform.toUpperCase()}_WEBHOOK_SECRET`;
  const configured = ctx.secret(ref);
  if (configured) {
    if (ctx.io.env[ref] === configured) ctx.checkDestination('connectorUrl', ref, 'env');
    return configured;
  }
  if (isLoopback(url)) {
    const fallback = (LOCAL_SECRETS as Record<string, string>)[ref];
    if (fallback) {
      writeLine(ctx.io.stderr, `signing with the local default ${ref}=${fallback}`);
      return fallback;
    }
  }
  throw new CliError(`no signing secret for source ${sourceId}: pass --secret or set ${ref}`);
}

function isLoopback(url: string): boolean {
  try {
    const host = new URL(url).hostname;
    return host === 'localhost' || host === '127.0.0.1' || host === '[::1]' || host === '::1';
  } catch {
    return false;
  }
}
