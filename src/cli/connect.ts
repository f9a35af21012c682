import { readFile } from 'node:fs/promises';
import { NO_LOG_NOTE } from '../verify/tlog/no-log.ts';
import { ConnectRefusal, startConnect, type ConnectOptions, type RunningConnect } from '../connect/start.ts';
import { AttestationError } from '../client/index.ts';
import { isVerifyError } from '../verify/errors.ts';
import { formatChecks } from './check-report.ts';
import { UsageError } from './cli-errors.ts';
import { parseCommandLine, refuseUsage, type CommandLine, type CommandSpec } from './command-line.ts';
import { RELEASE_TRUST_OPTIONS, releaseTrustFrom, releaseUsageProblem } from './release-trust.ts';

/** `sigil connect`: its options are the one block below. */
export const command = {
  name: 'connect',
  summary: `A local OpenAI-compatible endpoint for any client (docs/connect.md). It attests the service at URL as
sigil verify does, then relays every request on loopback: bodies sealed to the attested key (EHBP), TLS
pinned to the attested key where it ends in the enclave, a receipt asked for and verified on every answer.
An answer that does not verify reaches the app as an error (502, param naming the failed check); a stream
whose receipt fails ends with an error event instead of data: [DONE]. Point the app's base URL at
http://LISTEN/v1; its API key passes through. GET / and GET /status show the verdict and the receipts.`,
  operands: [['<URL>', 'the attested service, e.g. https://inference.example.com']],
  options: {
    listen: {
      type: 'string',
      value: 'HOST:PORT',
      description: 'where the app connects (port 0: any free one); loopback only unless --expose-to-network',
      default: '127.0.0.1:8480',
    },
    reference: { type: 'string', value: 'FILE', description: 'reference values (docs/auditing.md), as sigil verify takes them' },
    release: {
      type: 'string',
      value: 'FILE',
      description: 'a signed release manifest whose values are reference values, with --key, or --identity and --issuer',
    },
    ...RELEASE_TRUST_OPTIONS,
    collateral: { type: 'string', value: 'DIR', description: 'a collateral bundle (sigil collateral fetch), used offline as sigil verify uses it' },
    brand: { type: 'string', value: 'NAME', description: "the brand word of the service's header names (default Service)" },
    ca: { type: 'string', value: 'FILE', description: 'extra CA certificates (PEM) for a load balancer that ends TLS before the enclave' },
    'audit-dir': {
      type: 'string',
      value: 'DIR',
      description:
        'keep every receipt, the bytes it covers and the evidence it was verified against; sigil verify --audit DIR checks them again offline (the files hold your prompts)',
    },
    'log-state': {
      type: 'string',
      value: 'FILE',
      description:
        "keep the service's log checkpoints seen across runs (default: in memory); each receipt is checked to be in the attested transparency log, failures on stderr and /status",
    },
    'reattest-every': {
      type: 'string',
      value: 'DURATION',
      description:
        'attest the service again at least this often (default 1h; 10s to 24h, e.g. 90s, 30m, 2h), sooner when collateral it used expires or a key changes; requests wait for it, and while a re-attestation fails every answer is refused (502 naming the check)',
    },
    'fresh-report': {
      type: 'boolean',
      description:
        "ask for a fresh hardware report (CPU and every GPU) bound to connect's own nonce at each attestation; without it freshness rests on the start evidence and a signed nonce",
      default: false,
    },
    'require-inclusion': {
      type: 'boolean',
      description: "hold each JSON answer until the service's log proves it holds its receipt (up to ~12 s)",
      default: false,
    },
    'allow-unpinned-code': { type: 'boolean', description: 'accept measured values no reference value pins (each is WAIVED)', default: false },
    'allow-no-tee': { type: 'boolean', description: 'accept a development service without hardware (tee "none"): nothing is attested', default: false },
    'allow-insecure-http': { type: 'boolean', description: 'accept a plain http:// URL (only a development service can be verified so)', default: false },
    'allow-unsealed-bodies': {
      type: 'boolean',
      description: 'accept a service with no attested HPKE key: bodies protected only by TLS to the enclave',
      default: false,
    },
    'allow-host': {
      type: 'string',
      value: 'NAME',
      description:
        "also answer requests addressed to NAME, e.g. host.docker.internal for an app in Docker; a web page can then rebind NAME to this machine only if it controls NAME's DNS",
      multiple: true,
    },
    'expose-to-network': {
      type: 'boolean',
      description:
        'listen beyond loopback (--listen 0.0.0.0:8480): anyone who reaches the port and knows the local token uses your verified channel and your service key. Every app must send SIGIL_CONNECT_TOKEN (at least 32 characters) as its API key; connect sends SIGIL_API_KEY to the service instead. Traffic between the app and connect is plain HTTP on your network',
      default: false,
    },
    'max-answer-mib': { type: 'string', value: 'N', description: 'the largest JSON answer held for its receipt, in MiB (default 64)' },
    'ohttp-relay': {
      type: 'string',
      value: 'URL',
      description:
        "send every request (the attestation's too) through this Oblivious HTTP relay, sealed to the gateway key the attestation binds: the service sees the relay's address, not yours (docs/ohttp.md); URL names the service, which connect then never contacts directly",
    },
  },
  notes: `Exit status: runs until interrupted (0); 1 the service did not verify (nothing was sent); 2 bad usage, a port in use,
or flags missing that would accept what the service lacks (all named in one message).`,
} as const satisfies CommandSpec;

interface ConnectIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** Resolves when the command should stop (a signal); the CLI waits for SIGINT or SIGTERM. */
  stopped: Promise<unknown>;
  /** Where SIGIL_CONNECT_TOKEN and SIGIL_API_KEY are read (--expose-to-network); the CLI passes process.env. */
  env?: Record<string, string | undefined>;
  onListening?: (running: RunningConnect) => void;
}

async function readText(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new UsageError(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

const DURATION_UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000 } as const;
const REATTEST_BOUNDS_MS = { least: 10_000, most: 24 * 3_600_000 };

/** `--reattest-every`: a whole number of seconds, minutes or hours (`90s`, `30m`, `2h`), from 10 s to 24 h. */
export function parseReattestEvery(value: string): number {
  const match = /^(\d{1,6})([smh])$/.exec(value);
  const ms = match === null ? NaN : Number(match[1]) * DURATION_UNIT_MS[match[2] as keyof typeof DURATION_UNIT_MS];
  if (!(ms >= REATTEST_BOUNDS_MS.least && ms <= REATTEST_BOUNDS_MS.most))
    throw new UsageError(`--reattest-every is a duration from 10s to 24h, e.g. 30m or 1h; not ${JSON.stringify(value)}`);
  return ms;
}

function parseListen(value: string): { host: string; port: number } {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:]+):(\d{1,5})$/.exec(value);
  if (match === null || Number(match[2]) > 65535) throw new UsageError('--listen is HOST:PORT, e.g. 127.0.0.1:8480');
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port: Number(match[2]) };
}

/** --expose-to-network: the local token the apps send and the service key connect sends, both from the environment. */
function networkFrom(env: Record<string, string | undefined>): NonNullable<ConnectOptions['network']> {
  const localToken = env.SIGIL_CONNECT_TOKEN;
  const serviceApiKey = env.SIGIL_API_KEY;
  if (localToken === undefined || localToken === '')
    throw new UsageError('--expose-to-network needs SIGIL_CONNECT_TOKEN: the local token every app must send as its API key');
  if (serviceApiKey === undefined || serviceApiKey === '')
    throw new UsageError('--expose-to-network needs SIGIL_API_KEY: the key connect sends to the service instead of the local token');
  return { localToken, serviceApiKey };
}

/** `--ohttp-relay URL`: an http(s) URL, said so before anything is sent. */
function relayUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`--ohttp-relay takes the relay's URL, e.g. https://relay.example.net/sigil/; not ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new UsageError(`--ohttp-relay takes an http(s) URL; not ${value}`);
  return url.href;
}

async function optionsFrom(line: CommandLine<typeof command.options>, env: Record<string, string | undefined>): Promise<ConnectOptions> {
  const { values: v, positionals } = line;
  const trust = { key: v.key, identity: v.identity, issuer: v.issuer, 'trusted-root': v['trusted-root'] };
  const problem = releaseUsageProblem(v.release, trust);
  if (problem !== undefined) throw new UsageError(problem);
  if (v.brand !== undefined && !/^[A-Za-z0-9-]+$/.test(v.brand)) throw new UsageError('--brand is one word of letters, digits and hyphens');
  const options: ConnectOptions = {
    service: positionals[0]!,
    listen: parseListen(v.listen),
    allowUnpinnedCode: v['allow-unpinned-code'],
    allowNoTee: v['allow-no-tee'],
    allowInsecureHttp: v['allow-insecure-http'],
    allowUnsealedBodies: v['allow-unsealed-bodies'],
    freshReport: v['fresh-report'],
    requireInclusion: v['require-inclusion'],
  };
  if (v['reattest-every'] !== undefined) options.reattestEvery = parseReattestEvery(v['reattest-every']);
  if (v.reference !== undefined) options.reference = v.reference;
  if (v.collateral !== undefined) options.collateral = v.collateral;
  if (v.brand !== undefined) options.brand = v.brand;
  if (v['audit-dir'] !== undefined) options.auditDir = v['audit-dir'];
  if (v['log-state'] !== undefined) options.logStateFile = v['log-state'];
  if (v['ohttp-relay'] !== undefined) options.ohttpRelay = relayUrl(v['ohttp-relay']);
  if (v['allow-host'] !== undefined) options.allowHosts = v['allow-host'];
  if (v['expose-to-network']) options.network = networkFrom(env);
  if (v['max-answer-mib'] !== undefined) {
    const mib = Number(v['max-answer-mib']);
    if (!Number.isInteger(mib) || mib < 1) throw new UsageError('--max-answer-mib is a whole number of MiB, at least 1');
    options.maxAnswerBytes = mib * 1024 * 1024;
  }
  if (v.ca !== undefined) options.ca = (await readText(v.ca, 'CA file')).toString('utf8');
  if (v.release !== undefined) {
    const releaseTrust = await releaseTrustFrom(trust, { read: readText, usage: (m) => new UsageError(m), unreadable: (m) => new UsageError(m) });
    options.release = { bundle: v.release, trust: releaseTrust };
  }
  return options;
}

/** `sigil connect` with its output and its stop signal given, so tests run it in-process. */
export async function connectCommand(argv: string[], io: ConnectIo): Promise<number> {
  const line = parseCommandLine(command, argv, io);
  if (typeof line === 'number') return line;
  let options: ConnectOptions;
  try {
    options = await optionsFrom(line, io.env ?? {});
  } catch (err) {
    return refuseUsage(command, (err as Error).message, io);
  }
  let running: RunningConnect;
  options.onFailedReceipt = (line) => io.stderr.write(`sigil connect: ${line}\n`);
  try {
    running = await startConnect(options);
  } catch (err) {
    if (err instanceof AttestationError) {
      io.stderr.write(formatChecks(err.checks));
      io.stderr.write(`sigil connect: ${err.message}\n`);
      return 1;
    }
    if (err instanceof ConnectRefusal && err.checks !== undefined) io.stderr.write(formatChecks(err.checks));
    if (err instanceof ConnectRefusal || isVerifyError(err) || err instanceof TypeError) {
      io.stderr.write(`sigil connect: ${(err as Error).message}\n`);
      return err instanceof ConnectRefusal || err instanceof TypeError ? 2 : 1;
    }
    io.stderr.write(`sigil connect: could not reach or verify ${options.service}: ${(err as Error).message}\n`);
    return 1;
  }
  const attestation = running.fetch.attestation;
  io.stdout.write(formatChecks(attestation.checks));
  if (attestation.transparencyLog === null) io.stdout.write(`sigil connect: note: ${NO_LOG_NOTE}\n`);
  io.stdout.write(`sigil connect: ${options.service} verified; point your client at ${running.url}/v1 (status: ${running.url}/)\n`);
  io.onListening?.(running);
  await io.stopped;
  await running.close();
  return 0;
}

export async function run(argv: string[]): Promise<number> {
  const stopped = new Promise((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  return connectCommand(argv, { stdout: process.stdout, stderr: process.stderr, stopped, env: process.env });
}
