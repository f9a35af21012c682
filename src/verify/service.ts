import { request, type Dispatcher } from 'undici';
import { field, sameJson } from './binding.ts';
import { beforeDeadline, deadlineError, isBoundedReadError, readBounded, readDeadline, tooLargeError, type ReadDeadline } from './bounded-read.ts';
import { VerifyError } from './errors.ts';
import type { SpkiPin } from './tls-pin.ts';
import type { ServiceEvidence } from './verify-service.ts';
import type { ServedOhttpKeys } from './ohttp-key.ts';
import { GATEWAY_PATH, KEYS_MEDIA_TYPE } from '../protocol/ohttp.ts';

/** The JSON documents a Sigil service publishes for verifiers (docs/api.md, docs/attestation.md). */
export interface VerificationMaterial {
  jwks: { keys: unknown[] };
  policy: unknown;
  /** GET /v1/verify/attestation?nonce=HEX: fresh evidence binding our nonce. */
  attestation: unknown;
}

const TIMEOUT_MS = 30_000;

/** What one fetch of a service's documents may cost: bytes per document and time for the whole fetch (docs/verify.md). */
export interface ServiceReadLimits {
  /** The largest document accepted (the attestation document, the JWKS, the policy, the HPKE key config), in bytes. */
  maxDocumentBytes: number;
  /** The deadline for the whole fetch, every request and every body in it, in milliseconds. */
  deadlineMs: number;
}

/** An attestation document of 64 GPUs' evidence is about 1 MiB; a minute is many times a fresh report's cost. */
export const DEFAULT_SERVICE_READ_LIMITS: ServiceReadLimits = { maxDocumentBytes: 4 * 1024 * 1024, deadlineMs: 60_000 };

/** One fetch's bounds: the cap of each document and the deadline all its requests share. */
export interface ServiceRead {
  maxBytes: number;
  deadline: ReadDeadline;
}

/** Bounds that start counting now. */
export function serviceRead(limits: ServiceReadLimits = DEFAULT_SERVICE_READ_LIMITS): ServiceRead {
  return { maxBytes: limits.maxDocumentBytes, deadline: readDeadline(limits.deadlineMs) };
}

/** `https://host/` and `https://host/v1` both name the same service. */
export function serviceUrl(base: string, path: string): URL {
  const root = base.replace(/\/+$/, '').replace(/\/v1$/, '');
  return new URL(`${root}/${path.replace(/^\/+/, '')}`);
}

/** What an OpenAI-shaped error body says, in one line; never the request's headers. */
export function errorSummary(status: number, text: string): string {
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    if (typeof message === 'string') return `HTTP ${status}: ${message}`;
  } catch {
    // not JSON: fall through to the raw text
  }
  return `HTTP ${status}: ${text.slice(0, 200)}`;
}

interface Answer {
  status: number;
  contentType: string | undefined;
  bytes: Buffer;
}

/** GET `url` under `read`'s cap and deadline; any failure to get a whole answer is an ERR_VERIFY_FETCH naming the URL and the bound. */
async function getAnswer(url: URL, headers: Record<string, string>, dispatcher: Dispatcher | undefined, what: string, read: ServiceRead): Promise<Answer> {
  try {
    const response = await beforeDeadline(
      what,
      read.deadline,
      request(url, {
        method: 'GET',
        headers,
        headersTimeout: TIMEOUT_MS,
        bodyTimeout: TIMEOUT_MS,
        signal: read.deadline.signal,
        ...(dispatcher === undefined ? {} : { dispatcher }),
      }),
    );
    const declared = Number(response.headers['content-length'] ?? '0');
    if (declared > read.maxBytes) {
      response.body.destroy();
      throw tooLargeError({ what, maxBytes: read.maxBytes });
    }
    const contentType = response.headers['content-type'];
    return {
      status: response.statusCode,
      contentType: Array.isArray(contentType) ? contentType[0] : contentType,
      bytes: await readBounded(response.body, { what, maxBytes: read.maxBytes, deadline: read.deadline }),
    };
  } catch (err) {
    const reason = read.deadline.signal.aborted && !isBoundedReadError(err) ? deadlineError(what, read.deadline) : (err as Error);
    throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: ${reason.message}`);
  }
}

/**
 * GET `url` through `dispatcher` (a pinned one, when given): the body's bytes of a 200, else an ERR_VERIFY_FETCH
 * naming the URL. `what` names the document in a bound's error; `read` caps its size and sets the deadline
 * (default: DEFAULT_SERVICE_READ_LIMITS, counted from now).
 */
export async function fetchBytes(
  url: URL,
  headers: Record<string, string> = {},
  dispatcher?: Dispatcher,
  what = `the answer to GET ${url.pathname}`,
  read: ServiceRead = serviceRead(),
): Promise<Buffer> {
  const answer = await getAnswer(url, headers, dispatcher, what, read);
  if (answer.status !== 200) throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: ${errorSummary(answer.status, answer.bytes.toString('utf8'))}`);
  return answer.bytes;
}

/** A JSON media type: `application/json` or a `+json` suffix, with any parameters. */
export function isJsonContentType(value: string | undefined | null): boolean {
  const type = (value ?? '').split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type);
}

/** fetchBytes for a JSON document: refused unless it comes as JSON (Content-Type) and parses. */
export async function fetchJson(
  url: URL,
  headers: Record<string, string> = {},
  dispatcher?: Dispatcher,
  what = `the answer to GET ${url.pathname}`,
  read: ServiceRead = serviceRead(),
): Promise<unknown> {
  const answer = await getAnswer(url, { accept: 'application/json', ...headers }, dispatcher, what, read);
  if (answer.status !== 200) throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: ${errorSummary(answer.status, answer.bytes.toString('utf8'))}`);
  if (!isJsonContentType(answer.contentType))
    throw new VerifyError(
      'ERR_VERIFY_FETCH',
      `GET ${url.href}: ${what} came as ${answer.contentType === undefined ? 'no content type' : JSON.stringify(answer.contentType)}, not application/json`,
    );
  try {
    return JSON.parse(answer.bytes.toString('utf8')) as unknown;
  } catch {
    throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: the body is not JSON`);
  }
}

function asJwks(value: unknown, where: string): { keys: unknown[] } {
  if (typeof value !== 'object' || value === null || !Array.isArray((value as { keys?: unknown }).keys)) {
    throw new VerifyError('ERR_VERIFY_FETCH', `${where}: not a JWKS (no keys array)`);
  }
  return value as { keys: unknown[] };
}

export async function fetchJwks(source: URL, dispatcher?: Dispatcher, read: ServiceRead = serviceRead()): Promise<{ keys: unknown[] }> {
  return asJwks(await fetchJson(source, {}, dispatcher, 'the JWKS', read), source.href);
}

/**
 * Fetches the JWKS, the policy document and fresh attestation evidence for `nonce` (32 bytes), through
 * `dispatcher` when given (a pinned one, so all three come from the server holding the attested TLS key).
 */
export async function fetchVerificationMaterial(
  base: string,
  nonce: Uint8Array,
  dispatcher?: Dispatcher,
  attestationHeaders: Record<string, string> = {},
  read: ServiceRead = serviceRead(),
): Promise<VerificationMaterial> {
  const attestationUrl = serviceUrl(base, 'v1/verify/attestation');
  attestationUrl.searchParams.set('nonce', Buffer.from(nonce).toString('hex'));
  const [jwks, policy, attestation] = await Promise.all([
    fetchJwks(serviceUrl(base, 'v1/verify/jwks.json'), dispatcher, read),
    fetchJson(serviceUrl(base, 'v1/verify/policy'), {}, dispatcher, 'the policy document', read),
    fetchJson(attestationUrl, attestationHeaders, dispatcher, 'the attestation document', read),
  ]);
  return { jwks, policy, attestation };
}

/** GET /v1/verify/attestation without a nonce: the evidence made at start, which `attestation_hash` names. */
export async function fetchStartAttestation(base: string, dispatcher?: Dispatcher, read: ServiceRead = serviceRead()): Promise<unknown> {
  return fetchJson(serviceUrl(base, 'v1/verify/attestation'), {}, dispatcher, 'the start attestation document', read);
}

/**
 * GET /v1/verify/attestation?nonce=HEX&proof=signature: the start evidence and `nonce` signed by the receipt key it
 * binds, both from the one server that answered (docs/attestation.md, "Freshness from a signed nonce").
 */
export async function fetchSignedNonce(
  base: string,
  nonce: Uint8Array,
  dispatcher?: Dispatcher,
  headers: Record<string, string> = {},
  read: ServiceRead = serviceRead(),
): Promise<{ attestation: unknown; signedNonce: string }> {
  const url = serviceUrl(base, 'v1/verify/attestation');
  url.searchParams.set('nonce', Buffer.from(nonce).toString('hex'));
  url.searchParams.set('proof', 'signature');
  const body = await fetchJson(url, headers, dispatcher, 'the attestation document', read);
  const signed = typeof body === 'object' && body !== null ? (body as { signed_nonce?: unknown }).signed_nonce : undefined;
  if (typeof signed !== 'string') throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: the answer has no signed_nonce`);
  return { attestation: (body as { attestation?: unknown }).attestation, signedNonce: signed };
}

/** GET /.well-known/hpke-keys: the exact key config bytes the service serves for encrypted bodies (docs/ehbp.md). */
export async function fetchHpkeKeyConfig(base: string, dispatcher?: Dispatcher, read: ServiceRead = serviceRead()): Promise<Uint8Array> {
  return new Uint8Array(await fetchBytes(serviceUrl(base, '.well-known/hpke-keys'), {}, dispatcher, 'the HPKE key config', read));
}

/**
 * GET /.well-known/ohttp-gateway: the Oblivious HTTP gateway's key list as served (RFC 9540, docs/ohttp.md), or
 * `'not served'` when the service answers 404 (it offers no gateway); anything else is an ERR_VERIFY_FETCH.
 */
export async function fetchOhttpGatewayKeys(
  base: string,
  dispatcher?: Dispatcher,
  read: ServiceRead = serviceRead(),
): Promise<Exclude<ServedOhttpKeys, Error>> {
  const url = serviceUrl(base, GATEWAY_PATH);
  const answer = await getAnswer(url, { accept: KEYS_MEDIA_TYPE }, dispatcher, 'the Oblivious HTTP gateway key', read);
  if (answer.status === 404) return 'not served';
  if (answer.status !== 200) throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: ${errorSummary(answer.status, answer.bytes.toString('utf8'))}`);
  const type = (answer.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== KEYS_MEDIA_TYPE)
    throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: came as ${JSON.stringify(answer.contentType ?? 'no content type')}, not ${KEYS_MEDIA_TYPE}`);
  return new Uint8Array(answer.bytes);
}

/**
 * Everything `verifyService` needs from a service, fetched in Node over `dispatcher` (pinned by `pin`): the JWKS,
 * the policy, the HPKE key config it serves when the binding names one, its Oblivious HTTP gateway's key, every TLS key its connections presented,
 * and freshness for `nonce`. `proof: 'report'` (the default) asks for a fresh hardware report and the start
 * evidence receipts name; `'signature'` asks for the start evidence and `nonce` signed by the key it binds
 * (docs/attestation.md, "Freshness from a signed nonce"), falling back to a fresh report when the JWKS served has
 * grown past the one key the start evidence binds (a fleet). `attestationHeaders` go with the nonce's request only
 * (an API key, so that the service counts the request against that key's allowance and not its address's).
 * `limits` caps each document and sets one deadline for the whole fetch: a bound passed is an ERR_VERIFY_FETCH naming it.
 */
export async function fetchServiceEvidence(
  base: string,
  nonce: Uint8Array,
  pin: SpkiPin,
  dispatcher: Dispatcher,
  proof: 'report' | 'signature' = 'report',
  attestationHeaders: Record<string, string> = {},
  limits: ServiceReadLimits = DEFAULT_SERVICE_READ_LIMITS,
): Promise<ServiceEvidence> {
  const read = serviceRead(limits);
  let evidence: ServiceEvidence | undefined;
  if (proof === 'signature') {
    const [jwks, policy, signed] = await Promise.all([
      fetchJwks(serviceUrl(base, 'v1/verify/jwks.json'), dispatcher, read),
      fetchJson(serviceUrl(base, 'v1/verify/policy'), {}, dispatcher, 'the policy document', read),
      fetchSignedNonce(base, nonce, dispatcher, attestationHeaders, read),
    ]);
    if (sameJson(field(field(signed.attestation, 'binding'), 'jwks'), jwks))
      evidence = { attestation: signed.attestation, signedNonce: signed.signedNonce, jwks, policy };
  }
  if (evidence === undefined) {
    const material = await fetchVerificationMaterial(base, nonce, dispatcher, attestationHeaders, read);
    evidence = { attestation: material.attestation, jwks: material.jwks, policy: material.policy };
    if (field(material.attestation, 'tee') !== 'none') evidence.startAttestation = await fetchStartAttestation(base, dispatcher, read);
  }
  const bindsHpke = typeof field(field(evidence.attestation, 'binding'), 'hpke_key_config') === 'string';
  const [servedHpke, servedOhttp] = await Promise.all([
    bindsHpke ? fetchHpkeKeyConfig(base, dispatcher, read).catch((err: Error) => err) : undefined,
    fetchOhttpGatewayKeys(base, dispatcher, read).catch((err: Error) => err),
  ]);
  if (servedHpke !== undefined) evidence.servedHpkeKeyConfig = servedHpke;
  evidence.servedOhttpKeys = servedOhttp;
  evidence.connection = { url: new URL(base), presentedTlsKeys: pin.accepted };
  return evidence;
}
