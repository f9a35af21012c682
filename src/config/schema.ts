import { z } from 'zod';
import { isAddressOrCidr } from './address-range.ts';

/** The shape of sigil.yaml (docs/configuration.md#sigilyaml). Every object is strict, so an unknown key fails at start. */
const port = z.number().int().min(0).max(65535);
const positiveInt = z.number().int().positive();
/** Headers that belong to one connection or to the body's framing: never forwarded, whatever the config says. */
export const UNFORWARDABLE_HEADERS = new Set([
  'host',
  'content-length',
  'content-type',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'expect',
]);

const upstream = z
  .strictObject({
    url: z.url({ protocol: /^https?$/ }),
    api_key_env: z.string().min(1).optional(),
    timeout_ms: positiveInt.default(600_000),
    connect_timeout_ms: positiveInt.default(10_000),
    /** Longest silence between two chunks of a stream before it is cut with an error event. */
    idle_timeout_ms: positiveInt.default(120_000),
    region: z.string().min(1).optional(),
    connections: positiveInt.default(256),
    /** SHA-256 (lowercase hex) of the engine's TLS public key (SPKI): every connection must present it. Needs an https URL. */
    tls_pin_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be the SHA-256 of the SPKI, 64 lowercase hex digits')
      .optional(),
    /** On a hardware TEE, an engine outside the VM (not loopback) needs a pinned TLS key, or this explicit setting (shown in the policy). */
    allow_outside_vm: z.boolean().default(false),
    /** Send each API key's own prefix-cache salt in `cache_salt` (vLLM) on chat and completions requests. */
    cache_salt: z.boolean().default(true),
    /** How often an engine marked unreachable is asked whether it is back (default 5000). */
    health_check_interval_ms: positiveInt.optional(),
    /** Client request headers passed on to this engine; none by default (not even Authorization). */
    forward_headers: z
      .array(
        z
          .string()
          .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'must be a header name')
          .transform((h) => h.toLowerCase())
          .refine(
            (h) => !UNFORWARDABLE_HEADERS.has(h),
            'hop-by-hop and framing headers (host, content-length, transfer-encoding, connection, keep-alive, te, trailer, upgrade, expect, ...) are never forwarded',
          ),
      )
      .default([]),
  })
  .refine((u) => u.tls_pin_sha256 === undefined || u.url.startsWith('https:'), { message: 'a pinned TLS key needs an https URL', path: ['tls_pin_sha256'] });

export const configSchema = z.strictObject({
  listen: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      port: port.default(8080),
      /** Load balancers (addresses or CIDRs) whose X-Forwarded-For names the client, for per-address allowances (docs/configuration.md). */
      trusted_proxies: z.array(z.string().refine(isAddressOrCidr, 'must be an IPv4 or IPv6 address, or a CIDR such as 10.0.0.0/8')).default([]),
    })
    .prefault({}),
  /** Processes serving behind one socket (docs/configuration.md "workers"); absent: `sigil serve` uses the cores it may run on, the in-process API one. */
  workers: z.int().min(1).max(512).optional(),
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
      /** TDX: the register Sigil extends with its own event at start (the TDX guest driver's sysfs attribute, Linux 6.16+). */
      rtmr_path: z.string().min(1).default('/sys/class/misc/tdx_guest/measurements/rtmr3:sha384'),
      /** TDX: the CCEL ACPI table and its event log, published for the verifier's replay. */
      ccel_table_path: z.string().min(1).default('/sys/firmware/acpi/tables/CCEL'),
      ccel_data_path: z.string().min(1).default('/sys/firmware/acpi/tables/data/CCEL'),
      /** TDX: where the RTMR3 events of earlier starts in this VM are kept (tmpfs: it must be cleared when the VM is). */
      runtime_log_path: z.string().min(1).default('/run/sigil/rtmr-events.json'),
      /** NVIDIA GPU evidence (docs/attestation.md#gpu-evidence): auto = when the GPUs run in confidential-computing mode; required = refuse to start otherwise. */
      gpu: z.enum(['auto', 'required', 'off']).default('auto'),
      /** The NVML library to load (a name the dynamic loader resolves, or a path). */
      nvml_library: z.string().min(1).default('libnvidia-ml.so.1'),
      /** SEV-SNP: how keys with `key_source: sealed` are derived by the firmware (docs/attestation.md#keys). */
      sealing: z
        .strictObject({
          device: z.string().min(1).default('/dev/sev-guest'),
          /** The chip's VCEK, or the VM root key (VMRK) a migration agent carries to another chip. */
          root_key: z.enum(['vcek', 'vmrk']).default('vcek'),
          /** The launch values the key is bound to; `measurement` is required, or any guest on the chip could derive it. */
          bind_to: z
            .array(z.enum(['policy', 'image_id', 'family_id', 'measurement']))
            .min(1)
            .default(['measurement', 'policy'])
            .refine((fields) => fields.includes('measurement'), 'must include measurement: a key not bound to it can be derived by any guest on the same chip'),
        })
        .prefault({}),
    })
    .prefault({}),
  receipts: z
    .strictObject({
      /** generated: made at each start; file: `key_file`; sealed: derived by the SEV-SNP firmware. Default: file when key_file is set. */
      key_source: z.enum(['generated', 'file', 'sealed']).optional(),
      key_file: z.string().min(1).optional(),
      retention_s: positiveInt.default(3600),
      max_stored: positiveInt.default(100_000),
      /** At most this many per API key, so one key cannot evict the others' receipts. */
      max_stored_per_key: positiveInt.default(10_000),
    })
    .prefault({})
    .superRefine((receipts, ctx) => {
      const source = receipts.key_source;
      if (source === 'file' && receipts.key_file === undefined)
        ctx.addIssue({ code: 'custom', path: ['key_file'], message: 'receipts.key_source file needs receipts.key_file' });
      if (source !== undefined && source !== 'file' && receipts.key_file !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['key_file'], message: `receipts.key_file is read only with key_source file, not ${source}` });
      }
    }),
  limits: z
    .strictObject({
      max_body_bytes: positiveInt.default(4 * 1024 * 1024),
      /** Fresh attestations (GET /v1/verify/attestation?nonce=) each client may ask at once, then per second: per API key, else per address. */
      fresh_attestation_burst: positiveInt.default(10),
      fresh_attestations_per_s: z.number().positive().default(5),
      /** Signed nonces (GET /v1/verify/attestation?nonce=&proof=signature, one ES256 signature each) per client at once, then per second. */
      signed_nonce_burst: positiveInt.default(200),
      signed_nonces_per_s: z.number().positive().default(100),
      /** One engine stream event larger than this ends the stream with an error event (docs/decisions.md#hostile-peers). */
      max_sse_event_bytes: positiveInt.default(1024 * 1024),
      /** A stream still running after this long ends with an error event and the engine request is cancelled. */
      max_stream_seconds: z.number().positive().default(3600),
      /** A stream whose bytes to the client would pass this ends with an error event and the engine request is cancelled. */
      max_stream_bytes: positiveInt.default(256 * 1024 * 1024),
      headers_timeout_ms: positiveInt.default(10_000),
      body_timeout_ms: positiveInt.default(30_000),
      /** All request bodies and buffered (non-streamed) engine answers held at once; past it, 503 with Retry-After. */
      buffer_budget_bytes: positiveInt.default(256 * 1024 * 1024),
      /** One non-streamed engine answer larger than this is refused (502). */
      max_answer_bytes: positiveInt.default(64 * 1024 * 1024),
      /** A client that takes no bytes of a buffered answer for this long is disconnected and the answer dropped. */
      client_read_timeout_ms: positiveInt.default(30_000),
      max_concurrent: positiveInt.default(1024),
      max_concurrent_per_key: positiveInt.default(64),
      /** Per API key; 0 = no limit. */
      requests_per_minute: z.number().int().nonnegative().default(0),
      tokens_per_minute: z.number().int().nonnegative().default(0),
      /** On SIGTERM, how long in-flight requests may take to finish before they are cut. */
      shutdown_grace_ms: z.number().int().nonnegative().default(30_000),
      /** On a stop, how long /readyz answers 503 (requests still served) before the listener closes; absent: see shutdownDrainMs. */
      shutdown_drain_ms: z.number().int().nonnegative().optional(),
    })
    .prefault({}),
  /** TLS that ends inside the enclave (docs/tls.md); its key's SPKI hash is bound in the attestation. */
  tls: z
    .strictObject({
      mode: z.enum(['off', 'self-signed', 'acme', 'files']).default('off'),
      /** With a hardware TEE, `off` refuses to start unless this is set (e.g. behind an in-enclave terminator). */
      allow_plaintext: z.boolean().default(false),
      /** The certificate's DNS names (self-signed and acme); the first is its common name. */
      hostnames: z
        .array(
          z
            .string()
            .regex(/^(?=.{1,253}$)(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/, 'must be a DNS name'),
        )
        .default([]),
      /** `files` mode: PEM certificate chain (leaf first) and its private key. */
      cert_file: z.string().min(1).optional(),
      key_file: z.string().min(1).optional(),
      acme: z
        .strictObject({
          directory_url: z.url({ protocol: /^https?$/ }),
          email: z.email().optional(),
          /** PEM of the CA that signs a private ACME server's own HTTPS certificate. */
          ca_file: z.string().min(1).optional(),
          /** Where Sigil answers http-01 challenges in plain HTTP (the ACME server connects to port 80 of each hostname). */
          http_host: z.string().min(1).default('0.0.0.0'),
          http_port: port.default(80),
          /** Renew when the certificate has less than this many seconds left. */
          renew_before_s: positiveInt.default(30 * 24 * 3600),
          /** How often the certificate's remaining life is checked; failed renewals retry sooner, backing off up to this. */
          check_interval_s: positiveInt.default(12 * 3600),
        })
        .optional(),
    })
    .prefault({})
    .superRefine((tls, ctx) => {
      const need = (key: string, why: string) => ctx.addIssue({ code: 'custom', path: key.split('.'), message: why });
      if (tls.mode === 'files' && tls.cert_file === undefined) need('cert_file', 'tls.mode files needs tls.cert_file (PEM certificate chain)');
      if (tls.mode === 'files' && tls.key_file === undefined) need('key_file', 'tls.mode files needs tls.key_file (PEM private key)');
      if (tls.mode === 'acme' && tls.acme === undefined) need('acme', 'tls.mode acme needs tls.acme.directory_url');
      if (tls.mode === 'acme' && tls.hostnames.length === 0) need('hostnames', 'tls.mode acme needs at least one hostname to ask a certificate for');
    }),
  /** End-to-end encrypted bodies (docs/ehbp.md): on by default; `required` refuses POSTs sent in the clear. */
  ehbp: z
    .strictObject({
      enabled: z.boolean().default(true),
      required: z.boolean().default(false),
      /** generated: a new HPKE key at each start; sealed: derived by the SEV-SNP firmware, the same on every start. */
      key_source: z.enum(['generated', 'sealed']).default('generated'),
      /** How long the encapsulated key of a sealed request is remembered, so the same request sent again is refused. */
      replay_window_s: z.number().int().min(1).max(604800).default(3600),
      /** At most this many remembered at once (about 100 bytes each); full, sealed requests are refused with 503 until the oldest expire. */
      replay_max_entries: z.number().int().min(1).default(250000),
      /** Each write of a sealed stream is padded to a multiple of this many bytes with an SSE comment line, hiding token lengths; 0 = off. */
      stream_padding_bytes: z.number().int().min(0).max(65536).default(256),
    })
    .prefault({}),
  /** Browsers may call Sigil only from these origins ("*" for any); empty: CORS off. */
  cors: z.strictObject({ allowed_origins: z.array(z.string().min(1)).default([]) }).prefault({}),
  /** The trust page's built files (docs/trust-page.md); default: dist/trust-page in the package. */
  trust_page: z.strictObject({ dir: z.string().min(1).optional() }).optional(),
  /** OpenTelemetry traces, off unless an OTLP endpoint is given (docs/operations.md#tracing). */
  tracing: z
    .strictObject({
      /** OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces (the collector's default port and path). */
      otlp_endpoint: z.url({ protocol: /^https?$/ }).optional(),
      service_name: z.string().min(1).default('sigil'),
      /** Longest wait before a batch of spans is sent. */
      export_delay_ms: positiveInt.default(5000),
    })
    .prefault({}),
  metrics: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** When set, GET /metrics needs `Authorization: Bearer <value of this variable>`. */
      bearer_token_env: z.string().min(1).optional(),
    })
    .prefault({}),
  log: z
    .strictObject({
      level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      /** json: JSON lines; pretty: one readable line each; auto: pretty when stdout is a terminal, else JSON. */
      format: z.enum(['auto', 'json', 'pretty']).default('auto'),
    })
    .prefault({}),
  /** The built-in llama.cpp engine, started when no upstream is configured. Without `model`: the demo model. */
  engine: z
    .strictObject({
      model: z.string().min(1).optional(),
      threads: positiveInt.default(1),
      parallel: positiveInt.default(2),
      context_size: positiveInt.default(4096),
      /** How long the engine may take to start (a slow machine, e.g. a VM under emulation, needs more). */
      start_timeout_ms: positiveInt.default(60_000),
    })
    .prefault({}),
  /** Fleet mode (docs/operations.md#fleet-mode): replicas share limits, receipts, signing keys and revocations through Redis. Absent: single node. */
  fleet: z
    .strictObject({
      redis_url: z.url({ protocol: /^rediss?$/ }),
      /** Names this replica in logs and in the key registry; default: host name and a random suffix. */
      replica_id: z
        .string()
        .regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 letters, digits, dots, dashes or underscores')
        .optional(),
      /** Prefix of every Redis key, so fleets can share a server. */
      namespace: z
        .string()
        .regex(/^[A-Za-z0-9._-]{1,32}$/, 'must be 1-32 letters, digits, dots, dashes or underscores')
        .default('sigil'),
      /** A replica's signing key is live while it refreshes it within this many seconds; then retired. */
      key_ttl_s: positiveInt.default(15),
      revocation_poll_ms: positiveInt.default(2000),
      connect_timeout_ms: positiveInt.default(2000),
      /** A Redis command slower than this falls back to local state, so Redis never stalls a request. */
      command_timeout_ms: positiveInt.default(250),
      /** Peer launch measurements (lowercase hex) whose keys are served besides this replica's own (rolling upgrades). */
      trusted_measurements: z.array(z.string().regex(/^[0-9a-f]+$/, 'must be lowercase hex')).default([]),
      /** Peer manifests (lowercase hex SHA-384, what `sigil measure self` prints) whose keys are served besides this replica's own (rolling upgrades). */
      trusted_manifests: z.array(z.string().regex(/^[0-9a-f]{96}$/, 'must be 96 lowercase hex digits (a SHA-384)')).default([]),
      /** Without hardware (tee none), serve peers' keys at all: nothing proves who made them, so whoever can write to Redis can add one. */
      admit_unattested_peers: z.boolean().default(false),
      /** Serve a peer's key that its binding declares loaded from a file (the operator may hold a copy); default: only keys made in or sealed to an enclave. */
      admit_loaded_keys: z.boolean().default(false),
    })
    .optional(),
  /** The transparency log of receipts (docs/log.md): each receipt's hash appended, served as C2SP tiles at /v1/log/. Absent: no log. */
  transparency_log: z
    .strictObject({
      /** The folder of the tiles, checkpoint and log.json; public data, so outside the enclave is fine. */
      dir: z.string().min(1),
      /** The last signed checkpoint, kept outside `dir` so a rolled-back folder is refused (docs/log.md#rollback); default `<dir>.state`. */
      state: z.string().min(1).optional(),
      /** The log's name in its checkpoints; default: `<tls.hostnames[0]>/v1/log` (its URL prefix, schema-less) when set, else origin_prefix and a random ID. */
      origin: z
        .string()
        .regex(/^[^\s+]+$/u, 'must hold no spaces or plus signs')
        .optional(),
      /** generated: a new checkpoint key at each start; file: `key_file` (PKCS#8 PEM Ed25519); sealed: derived by the SEV-SNP firmware, the same while the code is. */
      key_source: z.enum(['generated', 'file', 'sealed']).default('generated'),
      key_file: z.string().min(1).optional(),
      /** A new log's origin is this prefix, a slash and a random log ID. */
      origin_prefix: z
        .string()
        .regex(/^[^\s+]+$/u, 'must hold no spaces or plus signs')
        .default('sigil'),
      /** Pending entries are integrated, and one checkpoint signed, this often. */
      batch_ms: positiveInt.max(10_000).default(1000),
      /** How many recent receipt ids the log remembers for GET /v1/log/proof?receipt_id= (the leaf index always works). */
      ids_kept: positiveInt.default(100_000),
      /** Witnesses each new checkpoint is pushed to (C2SP tlog-witness add-checkpoint): their URL prefix and cosignature/v1 key. */
      witnesses: z
        .array(
          z.strictObject({
            url: z.url({ protocol: /^https?$/ }),
            vkey: z.string().regex(/^[^\s+]+\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+$/, 'must be a cosignature/v1 verifier key (name+keyid+base64)'),
          }),
        )
        .default([]),
      /** How many witnesses must cosign a checkpoint before it is served as cosigned (default: all of them). */
      witness_quorum: z.number().int().nonnegative().optional(),
      /** How long a witness may take to answer one add-checkpoint. */
      witness_timeout_ms: positiveInt.max(60_000).default(5000),
    })
    .refine((t) => t.witness_quorum === undefined || t.witness_quorum <= t.witnesses.length, {
      message: 'witness_quorum may not exceed the number of witnesses',
      path: ['witness_quorum'],
    })
    .superRefine((log, ctx) => {
      if (log.key_source === 'file' && log.key_file === undefined)
        ctx.addIssue({ code: 'custom', path: ['key_file'], message: 'transparency_log.key_source file needs transparency_log.key_file' });
      if (log.key_source !== 'file' && log.key_file !== undefined)
        ctx.addIssue({ code: 'custom', path: ['key_file'], message: `transparency_log.key_file is read only with key_source file, not ${log.key_source}` });
    })
    .optional(),
});

export type SigilConfig = z.infer<typeof configSchema>;
export type UpstreamConfig = z.infer<typeof upstream>;
