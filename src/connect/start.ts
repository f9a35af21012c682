import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import {
  AttestationError,
  createAttestedFetch,
  type Attested,
  type AttestedFetch,
  type AttestedFetchOptions,
  type Exchange,
  type InclusionVerdict,
  type ReceiptResult,
} from '../client/index.ts';
import { remediesFor } from '../client/check-remedies.ts';
import type { Check } from '../verify/check.ts';
import { HttpError, toHttpError } from '../protocol/errors.ts';
import { AuditDirectory } from './audit.ts';
import { checkHost, checkLocalToken, checkOrigin, LOOPBACK, MIN_LOCAL_TOKEN_LENGTH, type AccessRules } from './access.ts';
import { relay, sendError, type RelayTarget } from './relay.ts';
import { connectStatus, ReceiptBook, statusPage, type ConnectStatus } from './status.ts';
import { SigilError } from '../protocol/sigil-error.ts';

export interface ConnectOptions {
  /** The service, e.g. `https://inference.example.com` (a trailing `/v1` is fine). */
  service: string;
  /** Where the app connects: a loopback address only; port 0 picks a free one. */
  listen: { host: string; port: number };
  reference?: AttestedFetchOptions['reference'];
  release?: AttestedFetchOptions['release'];
  collateral?: AttestedFetchOptions['collateral'];
  roots?: AttestedFetchOptions['roots'];
  gpuRoots?: AttestedFetchOptions['gpuRoots'];
  /** Extra CA certificates (PEM) for a load balancer ending TLS before the enclave (bodies are sealed then). */
  ca?: string;
  brand?: string;
  allowUnpinnedCode?: boolean;
  /** Accept a development service without hardware (tee "none"). */
  allowNoTee?: boolean;
  /** Accept a service reached over plain http:// (only a development service can be verified so). */
  allowInsecureHttp?: boolean;
  /** Accept a service that offers no attested HPKE key: bodies then travel only inside TLS that must end in the enclave. */
  allowUnsealedBodies?: boolean;
  /** Keep every receipt, the bytes it covers and the evidence it was verified against (docs/connect.md, "Audit"). */
  auditDir?: string;
  /**
   * Told of each answer that failed verification (its path and the failed checks' names), and of each receipt the
   * service's transparency log does not hold or a log that forked (its receipt id and why): never any content.
   */
  onFailedReceipt?: (line: string) => void;
  /** A file keeping the largest log checkpoint seen across runs (the format of `sigil log --state`); default: in memory. */
  logStateFile?: string;
  /** Host names accepted besides loopback ones, e.g. `host.docker.internal` for an app in Docker (docs/connect.md). */
  allowHosts?: string[];
  /**
   * Listen beyond loopback (`--expose-to-network`): every app must send `localToken` as its key, and connect sends
   * `serviceApiKey` to the service instead. Without it, `listen.host` must be a loopback address.
   */
  network?: { localToken: string; serviceApiKey: string };
  /** The largest JSON answer held for its receipt, in bytes (default 64 MiB). */
  maxAnswerBytes?: number;
  /** The longest a verdict is trusted, in milliseconds (`--reattest-every`); default one hour. */
  reattestEvery?: number;
  /** A fresh hardware report (CPU and every GPU) bound to connect's own nonce at each attestation (`--fresh-report`). */
  freshReport?: boolean;
  /** The clock verdicts age by; the real one unless a test brings its own. */
  now?: () => Date;
  /** Hold each JSON answer until the service's log proves it holds its receipt (`--require-inclusion`). */
  requireInclusion?: boolean;
  /**
   * An Oblivious HTTP relay's URL (`--ohttp-relay`, docs/ohttp.md): every request, the attestation's among them, goes
   * through it sealed to the attested gateway key, so the service sees the relay's address, not this machine's.
   */
  ohttpRelay?: string;
}

export interface RunningConnect {
  /** `http://127.0.0.1:PORT`: the app's base URL is this plus `/v1`. */
  url: string;
  readonly fetch: AttestedFetch;
  status(): ConnectStatus;
  close(): Promise<void>;
}

/**
 * The check of a failed inclusion verdict that proves something wrong with the log: a receipt it does not hold, a proof
 * or checkpoint that does not verify, a fork. A log that could not be reached, or a check ended by closing, proves nothing.
 */
export function logFailureOf(verdict: InclusionVerdict): Check | undefined {
  return verdict.checks.find((c) => !c.ok && !c.detail.startsWith('ERR_TLOG_FETCH') && !c.detail.startsWith('the client was closed'));
}

/** Why connect refuses to start: a usage it will not accept, named with the flag that would accept it. */
export class ConnectRefusal extends SigilError<'ERR_CONNECT_REFUSED'> {
  /** The service's checks, when the refusal follows an attestation that failed only where a flag would accept it. */
  constructor(
    message: string,
    readonly checks?: readonly Check[],
  ) {
    super('ERR_CONNECT_REFUSED', message);
  }
}

const INSECURE_HTTP_RISK = 'anyone on the path can read and change the traffic (only a development service, --allow-no-tee, can be verified so)';

const UNSEALED = {
  flag: '--allow-unsealed-bodies',
  why: 'it offers no attested HPKE key, so request bodies could not be sealed to the enclave (EHBP): they would be protected only by TLS ending in the enclave',
};

/** One flag is said as before (what is wrong, then the flag); several are listed, so one run names every flag missing. */
function missingFlags(origin: string, missing: ReadonlyArray<{ flag: string; why: string }>): string {
  if (missing.length === 1) return `${origin}: ${missing[0]!.why}. ${missing[0]!.flag} accepts it`;
  return `${origin} is accepted only with ${missing.length} flags, each a risk to take knowingly:\n${missing.map((m) => `  ${m.flag}: ${m.why}`).join('\n')}`;
}

/** Binds the listen address for a moment before the service is contacted, so a port in use is said first and as connect's own. */
async function listenProblem(listen: { host: string; port: number }): Promise<string | undefined> {
  if (listen.port === 0) return undefined;
  const probe = createServer();
  const error = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    probe.once('error', resolve);
    probe.listen(listen.port, listen.host, () => resolve(undefined));
  });
  if (error === undefined) {
    await new Promise((resolve) => probe.close(resolve));
    return undefined;
  }
  const where = `--listen ${listen.host}:${listen.port}`;
  if (error.code === 'EADDRINUSE')
    return `${where}: port ${listen.port} on this machine is already in use, perhaps by another sigil connect. Stop that process, or choose another port: --listen ${listen.host}:0 takes any free one`;
  return `${where}: this machine cannot listen there: ${error.code ?? error.message}`;
}

/** The service's root: what the app's path (`/v1/...`) is appended to. */
export function serviceOrigin(service: string): string {
  const url = new URL(service);
  return `${url.origin}${url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '')}`;
}

/**
 * `sigil connect` (docs/connect.md): attests the service with the attested client (the one verification core), then
 * serves a local OpenAI-compatible endpoint on loopback that sends every request through that client, and a status
 * page. It refuses to start rather than downgrade: plain HTTP, unsealed bodies and a service without hardware each need
 * the flag that names what is given up.
 */
export async function startConnect(options: ConnectOptions): Promise<RunningConnect> {
  if (!LOOPBACK.test(options.listen.host) && options.network === undefined)
    throw new ConnectRefusal(
      `--listen ${options.listen.host}: sigil connect listens on loopback only (127.0.0.1, ::1, localhost): any app that reaches it uses your verified channel. --expose-to-network accepts that, with a local token every app must send (SIGIL_CONNECT_TOKEN)`,
    );
  if (options.network !== undefined && options.network.localToken.length < MIN_LOCAL_TOKEN_LENGTH)
    throw new ConnectRefusal(
      `the local token is shorter than ${MIN_LOCAL_TOKEN_LENGTH} characters: anyone on the network could guess it (e.g. openssl rand -hex 32)`,
    );
  const access: AccessRules = { allowHosts: (options.allowHosts ?? []).map((h) => h.toLowerCase()) };
  if (options.network !== undefined) access.localToken = options.network.localToken;
  const url = new URL(options.service);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ConnectRefusal(`${options.service} is not an http(s) URL`);
  const portInUse = await listenProblem(options.listen);
  if (portInUse !== undefined) throw new ConnectRefusal(portInUse);
  // Every flag missing is named at once: the attestation is still fetched over plain HTTP to learn the rest (only a nonce is sent).
  const missing: Array<{ flag: string; why: string }> = [];
  if (url.protocol === 'http:' && options.allowInsecureHttp !== true)
    missing.push({ flag: '--allow-insecure-http', why: `it is plain HTTP: ${INSECURE_HTTP_RISK}` });
  const origin = serviceOrigin(options.service);
  const book = new ReceiptBook();
  // Once the log is proven not to hold a receipt (or to fork), nothing more is passed on: the service broke its promise.
  let halted: { receiptId: string | undefined; check: Check } | undefined;
  const audit = options.auditDir === undefined ? undefined : new AuditDirectory(options.auditDir, origin);
  const fetchOptions: AttestedFetchOptions = {
    baseURL: `${origin}/v1`,
    allowNoTee: options.allowNoTee === true,
    allowUnpinnedCode: options.allowUnpinnedCode === true,
    onReceipt: (result: ReceiptResult) => {
      book.add(result);
      if (!result.ok)
        options.onFailedReceipt?.(`${result.stream ? 'stream' : 'JSON'} answer to ${result.path} NOT passed on: ${book.recent.at(-1)!.failed.join(', ')}`);
    },
    // Each receipt's inclusion in the service's log settles after the answer was passed on (docs/log.md, "Verifying").
    onInclusion: (verdict: InclusionVerdict, result: ReceiptResult) => {
      book.settle(result, verdict);
      const failure = logFailureOf(verdict);
      if (failure !== undefined && halted === undefined) {
        halted = { receiptId: verdict.receiptId, check: failure };
        book.halted = `receipt ${String(verdict.receiptId)}: ${failure.name}: ${failure.detail}`;
      }
      if (!verdict.ok)
        options.onFailedReceipt?.(
          `receipt ${String(verdict.receiptId)} of the ${result.stream ? 'stream' : 'JSON'} answer to ${result.path} failed its transparency-log check: ${verdict.detail}`,
        );
    },
    onExchange: (exchange: Exchange, result: ReceiptResult, attested: Attested) => audit?.keep(exchange, result, attested),
  };
  if (options.logStateFile !== undefined) fetchOptions.logStateFile = options.logStateFile;
  if (options.requireInclusion === true) fetchOptions.requireInclusion = true;
  for (const key of [
    'reference',
    'release',
    'collateral',
    'roots',
    'gpuRoots',
    'ca',
    'brand',
    'reattestEvery',
    'freshReport',
    'now',
    'maxAnswerBytes',
    'ohttpRelay',
  ] as const) {
    if (options[key] !== undefined) (fetchOptions as unknown as Record<string, unknown>)[key] = options[key];
  }
  let attestedFetch: AttestedFetch;
  try {
    attestedFetch = await createAttestedFetch(fetchOptions);
  } catch (err) {
    if (!(err instanceof AttestationError)) throw err;
    const { remedies, unaccepted } = remediesFor(err.checks);
    if (unaccepted.length > 0 || remedies.length === 0) throw err;
    for (const remedy of remedies) missing.push({ flag: remedy.flag, why: `${remedy.checks.join(', ')} did not pass: ${remedy.risk}` });
    if (options.allowUnsealedBodies !== true && !err.checks.some((c) => c.name === 'attestation.hpke_key' && c.ok)) missing.push(UNSEALED);
    throw new ConnectRefusal(missingFlags(origin, missing), err.checks);
  }
  if (attestedFetch.attestation.hpkeKeyConfig === null && options.allowUnsealedBodies !== true) missing.push(UNSEALED);
  if (missing.length > 0) {
    await attestedFetch.close();
    throw new ConnectRefusal(missingFlags(origin, missing));
  }
  if (options.requireInclusion === true && attestedFetch.attestation.transparencyLog === null) {
    await attestedFetch.close();
    throw new ConnectRefusal(`--require-inclusion: ${origin}'s attestation names no transparency log, so no answer could ever be proven logged`);
  }
  const target: RelayTarget = { fetch: attestedFetch, origin, requireSealedBodies: options.allowUnsealedBodies !== true };
  if (options.maxAnswerBytes !== undefined) target.maxAnswerBytes = options.maxAnswerBytes;
  if (options.network !== undefined) target.serviceApiKey = options.network.serviceApiKey;
  const status = () => connectStatus(origin, attestedFetch.attestation, book, attestedFetch.renewal, options.now?.() ?? new Date(), options.ohttpRelay);

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    checkHost(req, access);
    checkOrigin(req);
    const path = (req.url ?? '/').split('?')[0]!;
    // Beyond loopback the status, too, names the service: shown without the token only to this machine.
    if (path.startsWith('/v1/') || !LOOPBACK.test(req.socket.remoteAddress?.replace(/^::ffff:/, '') ?? '')) checkLocalToken(req, access);
    if (req.method === 'GET' && (path === '/' || path === '/status')) {
      const body = path === '/' ? statusPage(status()) : JSON.stringify(status(), null, 2);
      res.writeHead(200, { 'content-type': path === '/' ? 'text/html; charset=utf-8' : 'application/json', 'cache-control': 'no-store' });
      res.end(body);
      return;
    }
    if (!path.startsWith('/v1/')) throw new HttpError('not_found', `sigil connect serves /v1/... (relayed to ${origin}), / and /status; not ${path}.`);
    if (halted !== undefined)
      throw new HttpError(
        'transparency_log_failed',
        `sigil connect stopped passing answers on: the service's transparency log failed for receipt ${String(halted.receiptId)} (${halted.check.detail}); restart it once that is explained.`,
        { param: halted.check.name },
      );
    await relay(target, req, res);
  };
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => sendError(res, toHttpError(err), req.url));
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.listen.port, options.listen.host, resolve);
    });
  } catch (err) {
    await attestedFetch.close();
    throw err;
  }
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    fetch: attestedFetch,
    status,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await attestedFetch.close();
    },
  };
}
