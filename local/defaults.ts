/**
 * The settings of the connector run on this machine, written once for the three programs that
 * need them: the local stack (`npm start`, infra/local/), the operator CLI (cli/) and the platform
 * sandbox (sandbox/). Nothing here is a secret: every value is public and documented in the README.
 * This module imports nothing, so the CLI can read a port without loading the emulators.
 */

/** HTTP port of the local ingest API (`PORT`). */
export const LOCAL_PORT = 3000;

/** HTTP port of the platform sandbox (`SANDBOX_PORT`), under `npm start` and `npm run sandbox`. */
export const SANDBOX_PORT = 4010;

/** Bearer token of the sandbox's API routes (`SANDBOX_TOKEN`). */
export const SANDBOX_TOKEN = 'sandbox-token';

/**
 * What the sandbox's fakes of the shop APIs accept (sandbox/shops/), and the values of the local
 * sources' `shopApi.credentialsRef` variables when neither the environment nor `.env` sets them.
 */
export const LOCAL_SHOP_API_CREDENTIALS = {
  shopify: { accessToken: 'shpat_sandbox_read_orders' },
  woocommerce: { consumerKey: 'ck_sandbox_read', consumerSecret: 'cs_sandbox_read' },
  stripe: { secretKey: 'rk_test_sandbox_read_events' },
} as const;

/** The variables holding each local shop source's `shopApi` credentials (a JSON object each). */
export const LOCAL_SHOP_API_REFS = {
  shopify: 'SHOPIFY_API_CREDENTIALS',
  woocommerce: 'WOOCOMMERCE_API_CREDENTIALS',
  stripe: 'STRIPE_API_CREDENTIALS',
} as const;

/** Secrets of the local stack when neither the environment nor `.env` sets them. */
export const LOCAL_SECRETS = {
  SHOPIFY_WEBHOOK_SECRET: 'local-shopify-secret',
  WOOCOMMERCE_WEBHOOK_SECRET: 'local-woocommerce-secret',
  STRIPE_WEBHOOK_SECRET: 'whsec_local_stripe_secret',
  GENERIC_WEBHOOK_SECRET: 'local-generic-secret',
  FINANCE_API_KEY: 'local-finance-key-0123456789abcdef',
  // The local sources' shop API credentials (JSON): what the sandbox's shop fakes accept.
  [LOCAL_SHOP_API_REFS.shopify]: JSON.stringify(LOCAL_SHOP_API_CREDENTIALS.shopify),
  [LOCAL_SHOP_API_REFS.woocommerce]: JSON.stringify(LOCAL_SHOP_API_CREDENTIALS.woocommerce),
  [LOCAL_SHOP_API_REFS.stripe]: JSON.stringify(LOCAL_SHOP_API_CREDENTIALS.stripe),
} as const;

/** The local main queue (FIFO); its DLQ is named after it, `connector-events-dlq.fifo`. */
export const LOCAL_QUEUE_NAME = 'connector-events.fifo';

/** The local ledger table. */
export const LOCAL_TABLE_NAME = 'connector-ledger';

/** Written by `npm start` in the repository root (git-ignored): how the CLI finds the local stack. */
export const LOCAL_STATE_FILE = '.local-stack.json';

/** Region and credentials the local emulators accept; never real ones. */
export const LOCAL_AWS = {
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
} as const;
