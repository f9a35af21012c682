import { request, type Dispatcher } from 'undici';
import { field, sameJson } from './binding.ts';
import { VerifyError } from './errors.ts';
import type { SpkiPin } from './tls-pin.ts';
import type { ServiceEvidence } from './verify-service.ts';

/** The JSON documents a Sigil service publishes for verifiers (docs/api.md, docs/attestation.md). */
export interface VerificationMaterial {
  jwks: { keys: unknown[] };
  policy: unknown;
  /** GET /v1/verify/attestation?nonce=HEX: fresh evidence binding our nonce. */
  attestation: unknown;
}

const TIMEOUT_MS = 30_000;

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

/** GET `url` through `dispatcher` (a pinned one, when given): the body's bytes of a 200, else an ERR_VERIFY_FETCH naming the URL. */
export async function fetchBytes(url: URL, headers: Record<string, string> = {}, dispatcher?: Dispatcher): Promise<Buffer> {
  let status: number;
  let bytes: Buffer;
  try {
    const response = await request(url, {
      method: 'GET',
      headers,
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
      ...(dispatcher === undefined ? {} : { dispatcher }),
    });
    status = response.statusCode;
    bytes = Buffer.from(await response.body.arrayBuffer());
  } catch (err) {
    throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: ${(err as Error).message}`);
  }
  if (status !== 200) throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: ${errorSummary(status, bytes.toString('utf8'))}`);
  return bytes;
}

export async function fetchJson(url: URL, headers: Record<string, string> = {}, dispatcher?: Dispatcher): Promise<unknown> {
  const text = (await fetchBytes(url, { accept: 'application/json', ...headers }, dispatcher)).toString('utf8');
  try {
    return JSON.parse(text) as unknown;
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

export async function fetchJwks(source: URL, dispatcher?: Dispatcher): Promise<{ keys: unknown[] }> {
  return asJwks(await fetchJson(source, {}, dispatcher), source.href);
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
): Promise<VerificationMaterial> {
  const attestationUrl = serviceUrl(base, 'v1/verify/attestation');
  attestationUrl.searchParams.set('nonce', Buffer.from(nonce).toString('hex'));
  const [jwks, policy, attestation] = await Promise.all([
    fetchJwks(serviceUrl(base, 'v1/verify/jwks.json'), dispatcher),
    fetchJson(serviceUrl(base, 'v1/verify/policy'), {}, dispatcher),
    fetchJson(attestationUrl, attestationHeaders, dispatcher),
  ]);
  return { jwks, policy, attestation };
}

/** GET /v1/verify/attestation without a nonce: the evidence made at start, which `attestation_hash` names. */
export async function fetchStartAttestation(base: string, dispatcher?: Dispatcher): Promise<unknown> {
  return fetchJson(serviceUrl(base, 'v1/verify/attestation'), {}, dispatcher);
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
): Promise<{ attestation: unknown; signedNonce: string }> {
  const url = serviceUrl(base, 'v1/verify/attestation');
  url.searchParams.set('nonce', Buffer.from(nonce).toString('hex'));
  url.searchParams.set('proof', 'signature');
  const body = await fetchJson(url, headers, dispatcher);
  const signed = typeof body === 'object' && body !== null ? (body as { signed_nonce?: unknown }).signed_nonce : undefined;
  if (typeof signed !== 'string') throw new VerifyError('ERR_VERIFY_FETCH', `GET ${url.href}: the answer has no signed_nonce`);
  return { attestation: (body as { attestation?: unknown }).attestation, signedNonce: signed };
}

/** GET /.well-known/hpke-keys: the exact key config bytes the service serves for encrypted bodies (docs/ehbp.md). */
export async function fetchHpkeKeyConfig(base: string, dispatcher?: Dispatcher): Promise<Uint8Array> {
  return new Uint8Array(await fetchBytes(serviceUrl(base, '.well-known/hpke-keys'), {}, dispatcher));
}

/**
 * Everything `verifyService` needs from a service, fetched in Node over `dispatcher` (pinned by `pin`): the JWKS,
 * the policy, the HPKE key config it serves when the binding names one, every TLS key its connections presented,
 * and freshness for `nonce`. `proof: 'report'` (the default) asks for a fresh hardware report and the start
 * evidence receipts name; `'signature'` asks for the start evidence and `nonce` signed by the key it binds
 * (docs/attestation.md, "Freshness from a signed nonce"), falling back to a fresh report when the JWKS served has
 * grown past the one key the start evidence binds (a fleet). `attestationHeaders` go with the nonce's request only
 * (an API key, so that the service counts the request against that key's allowance and not its address's).
 */
export async function fetchServiceEvidence(
  base: string,
  nonce: Uint8Array,
  pin: SpkiPin,
  dispatcher: Dispatcher,
  proof: 'report' | 'signature' = 'report',
  attestationHeaders: Record<string, string> = {},
): Promise<ServiceEvidence> {
  let evidence: ServiceEvidence | undefined;
  if (proof === 'signature') {
    const [jwks, policy, signed] = await Promise.all([
      fetchJwks(serviceUrl(base, 'v1/verify/jwks.json'), dispatcher),
      fetchJson(serviceUrl(base, 'v1/verify/policy'), {}, dispatcher),
      fetchSignedNonce(base, nonce, dispatcher, attestationHeaders),
    ]);
    if (sameJson(field(field(signed.attestation, 'binding'), 'jwks'), jwks))
      evidence = { attestation: signed.attestation, signedNonce: signed.signedNonce, jwks, policy };
  }
  if (evidence === undefined) {
    const material = await fetchVerificationMaterial(base, nonce, dispatcher, attestationHeaders);
    evidence = { attestation: material.attestation, jwks: material.jwks, policy: material.policy };
    if (field(material.attestation, 'tee') !== 'none') evidence.startAttestation = await fetchStartAttestation(base, dispatcher);
  }
  if (typeof field(field(evidence.attestation, 'binding'), 'hpke_key_config') === 'string') {
    evidence.servedHpkeKeyConfig = await fetchHpkeKeyConfig(base, dispatcher).catch((err: Error) => err);
  }
  evidence.connection = { url: new URL(base), presentedTlsKeys: pin.accepted };
  return evidence;
}
