import type { AttestationDocumentV2 } from '../protocol/attestation.ts';
import { fail, verdictOf, type Check, type Verdict } from '../verify/check.ts';
import { headlineOf, type Headline } from '../verify/headline.ts';
import type { ServedOhttpKeys } from '../verify/ohttp-key.ts';
import type { ReferenceValues } from '../verify/reference/reference-values.ts';
import { verifyService as verifyWithCore, type ServiceEvidence, type ServiceExpectations, type ServiceFacts } from '../verify/verify-service.ts';
import { VerifyError } from '../verify/errors.ts';

export type { Headline } from '../verify/headline.ts';

export interface ServiceReport {
  /** The verifier's one verdict on these checks: the same `sigil verify` and the attested client give. */
  verdict: Verdict;
  headline: Headline;
  checks: Check[];
  document?: AttestationDocumentV2;
  facts?: ServiceFacts;
  models: ModelRow[];
}

export interface ModelRow {
  id: string;
  provider?: string;
  context_window?: number;
  reasoning?: boolean;
  pricing?: { input_per_mtok: number; output_per_mtok: number; currency: string };
  regions?: string[];
  endpoints?: string[];
}

function serviceUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, '').replace(/\/v1$/, '')}/${path}`;
}

async function getJson(base: string, path: string): Promise<unknown> {
  const response = await fetch(serviceUrl(base, path), { headers: { accept: 'application/json' } });
  if (!response.ok) throw new VerifyError('ERR_VERIFY_FETCH', `GET /${path} answered ${response.status}`);
  return response.json() as Promise<unknown>;
}

/** The bytes of a 200, or the reason there are none (the core says what a missing HPKE key config means). */
async function getBytes(base: string, path: string): Promise<Uint8Array | Error> {
  try {
    const response = await fetch(serviceUrl(base, path));
    if (!response.ok) return new VerifyError('ERR_VERIFY_FETCH', `GET /${path} answered ${response.status}`);
    return new Uint8Array(await response.arrayBuffer());
  } catch (err) {
    return err as Error;
  }
}

/** The Oblivious HTTP gateway's key list as the core reads it: its bytes, `'not served'` for a 404 (no gateway), or why not. */
async function getOhttpKeys(base: string): Promise<ServedOhttpKeys> {
  try {
    const response = await fetch(serviceUrl(base, '.well-known/ohttp-gateway'), { headers: { accept: 'application/ohttp-keys' } });
    if (response.status === 404) return 'not served';
    if (!response.ok) return new Error(`GET /.well-known/ohttp-gateway answered ${response.status}`);
    const type = response.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase();
    if (type !== 'application/ohttp-keys') return new Error(`GET /.well-known/ohttp-gateway came as ${JSON.stringify(type ?? 'no content type')}`);
    return new Uint8Array(await response.arrayBuffer());
  } catch (err) {
    return err as Error;
  }
}

function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** A RIM file the user loaded into the page: its name (for messages) and its text. */
export interface RimFile {
  name: string;
  text: string;
}

export interface VerifyServiceOptions {
  reference?: ReferenceValues;
  /** RIMs (NVIDIA SWID tags) loaded by the user: what `gpu.rims` of a reference file names for `sigil verify`. */
  rims?: RimFile[];
}

export { headlineOf };

/** Why a development service's missing hardware is waived on the page (receipts are tried under the same words). */
export const DEVELOPMENT_WAIVER = 'a development service (tee "none"): this page lets you try it, nothing more';

/** A service that could not be read at all: one failed check the registry declares, saying why. */
export function unreadableReport(check: Check): ServiceReport {
  const verdict = verdictOf([check]);
  return { verdict, headline: 'failed', checks: [check], models: [] };
}

/**
 * Verifies a Sigil service from the browser with the verifier's one core (`verifyService` of src/verify, the
 * same `sigil verify` and the attested client call): a fresh nonce, the documents fetched here, and the
 * reference values and RIMs the user gave. A page cannot see which TLS key its connection used, and says so:
 * the core reports `attestation.tls_key` as not checked, never as passed.
 */
export async function verifyService(base: string, options: VerifyServiceOptions = {}): Promise<ServiceReport> {
  const nonce = crypto.getRandomValues(new Uint8Array(32));
  let doc: AttestationDocumentV2;
  let jwks: { keys: unknown[] };
  let policy: unknown;
  let modelList: unknown;
  let start: unknown;
  try {
    [doc, jwks, policy, modelList] = (await Promise.all([
      getJson(base, `v1/verify/attestation?nonce=${toHex(nonce)}`),
      getJson(base, 'v1/verify/jwks.json'),
      getJson(base, 'v1/verify/policy'),
      getJson(base, 'v1/models?detail=true'),
    ])) as [AttestationDocumentV2, { keys: unknown[] }, unknown, unknown];
    // The evidence made at start, which receipts name by attestation_hash; a service without hardware has none.
    if (doc.tee !== 'none') start = await getJson(base, 'v1/verify/attestation');
  } catch (err) {
    return unreadableReport(fail('attestation.document', `could not read the service: ${(err as Error).message}`));
  }
  const models = ((modelList as { data?: ModelRow[] }).data ?? []).map((m) => ({ ...m }));
  const evidence: ServiceEvidence = { attestation: doc, jwks, policy, connection: { url: new URL(serviceUrl(base, '')), presentedTlsKeys: 'not visible' } };
  if (typeof doc.binding?.hpke_key_config === 'string') evidence.servedHpkeKeyConfig = await getBytes(base, '.well-known/hpke-keys');
  evidence.servedOhttpKeys = await getOhttpKeys(base);
  if (start !== undefined) evidence.startAttestation = start;
  if (options.rims !== undefined && options.rims.length > 0) evidence.rims = options.rims.map((r) => r.text);
  const expect: ServiceExpectations = { nonce };
  if (options.reference !== undefined) expect.reference = options.reference;
  // A development service is shown as one, to try and nothing more: its missing hardware is waived, as `sigil verify --allow-no-tee` waives it.
  if (doc.tee === 'none') expect.waive = { noHardwareEnclave: DEVELOPMENT_WAIVER };
  const result = await verifyWithCore(evidence, expect);
  return { verdict: result.verdict, headline: headlineOf(result.verdict, doc.tee), checks: result.checks, document: doc, facts: result.facts, models };
}
