import { z } from 'zod';

/** SPEC 7: the shape of sigil.yaml. Every object is strict, so an unknown key fails at start. */
const port = z.number().int().min(0).max(65535);
const positiveInt = z.number().int().positive();

const upstream = z.strictObject({
  url: z.url({ protocol: /^https?$/ }),
  api_key_env: z.string().min(1).optional(),
  timeout_ms: positiveInt.default(600_000),
  connect_timeout_ms: positiveInt.default(10_000),
  /** Longest silence between two chunks of a stream before it is cut with an error event. */
  idle_timeout_ms: positiveInt.default(120_000),
  region: z.string().min(1).optional(),
  connections: positiveInt.default(256),
});

export const configSchema = z.strictObject({
  listen: z.strictObject({ host: z.string().min(1).default('127.0.0.1'), port: port.default(8080) }).prefault({}),
  brand: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9-]{0,31}$/, 'must be 1-32 letters, digits or dashes (it goes into header names)')
    .default('Service'),
  upstreams: z.record(z.string().regex(/^[A-Za-z0-9_-]+$/, 'upstream names are letters, digits, _ and -'), upstream).default({}),
  catalogue: z.string().min(1).optional(),
  routing: z
    .strictObject({
      /** A request whose `region` no upstream of the model serves gets 400 instead of another region. */
      strict_regions: z.boolean().default(false),
      /** Hide catalogue models the engine does not list, instead of serving them with a warning. */
      hide_unlisted_models: z.boolean().default(false),
    })
    .prefault({}),
  auth: z.strictObject({ keys_file: z.string().min(1) }),
  attestation: z
    .strictObject({
      provider: z.enum(['auto', 'none', 'sev-snp', 'tdx']).default('none'),
      tsm_path: z.string().min(1).default('/sys/kernel/config/tsm/report'),
    })
    .prefault({}),
  receipts: z
    .strictObject({
      key_file: z.string().min(1).optional(),
      retention_s: positiveInt.default(3600),
      max_stored: positiveInt.default(100_000),
    })
    .prefault({}),
  limits: z
    .strictObject({
      max_body_bytes: positiveInt.default(4 * 1024 * 1024),
      headers_timeout_ms: positiveInt.default(10_000),
      body_timeout_ms: positiveInt.default(30_000),
      max_concurrent: positiveInt.default(1024),
      max_concurrent_per_key: positiveInt.default(64),
      /** Per API key; 0 = no limit. */
      requests_per_minute: z.number().int().nonnegative().default(0),
      tokens_per_minute: z.number().int().nonnegative().default(0),
      /** On SIGTERM, how long in-flight requests may take to finish before they are cut. */
      shutdown_grace_ms: z.number().int().nonnegative().default(30_000),
    })
    .prefault({}),
  metrics: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** When set, GET /metrics needs `Authorization: Bearer <value of this variable>`. */
      bearer_token_env: z.string().min(1).optional(),
    })
    .prefault({}),
  log: z.strictObject({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info') }).prefault({}),
  /** The built-in llama.cpp engine, started when no upstream is configured. Without `model`: the demo model. */
  engine: z
    .strictObject({
      model: z.string().min(1).optional(),
      threads: positiveInt.default(1),
      parallel: positiveInt.default(2),
      context_size: positiveInt.default(4096),
    })
    .prefault({}),
});

export type SigilConfig = z.infer<typeof configSchema>;
export type UpstreamConfig = z.infer<typeof upstream>;
