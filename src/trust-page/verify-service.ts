import type { AttestationDocumentV2 } from '../protocol/attestation.ts';
import { jcsSha256 } from '../protocol/jcs.ts';
import { verifyAttestationDocument } from '../verify/attestation.ts';
import { verifyJwksBinding } from '../verify/binding.ts';
import { fail, isNotPinned, type Check } from '../verify/check.ts';
import { verifyGpuEvidence } from '../verify/gpu/index.ts';
import type { ReferenceValues } from '../verify/reference/reference-values.ts';

/** A check as the page shows it: passed, failed, or a note (not checkable here, or not pinned). */
export interface PageCheck {
  name: string;
  status: 'pass' | 'fail' | 'note';
  detail: string;
}

export type Verdict = 'verified' | 'unpinned' | 'development' | 'failed';

export interface ServiceReport {
  verdict: Verdict;
  checks: PageCheck[];
  document?: AttestationDocumentV2;
  jwks?: { keys: unknown[] };
  policyHash?: string;
  models: ModelRow[];
  /** The exact bytes of /.well-known/hpke-keys, present only when they are the attested ones. */
  hpkeKeyConfig?: Uint8Array;
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

const page = (name: string, status: PageCheck['status'], detail: string): PageCheck => ({ name, status, detail });
/** A value nobody pinned is a note, never a pass: nothing was compared. */
const fromCheck = (c: Check): PageCheck => page(c.name, isNotPinned(c) ? 'note' : c.ok ? 'pass' : 'fail', c.detail);

function serviceUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, '').replace(/\/v1$/, '')}/${path}`;
}

async function getJson(base: string, path: string): Promise<unknown> {
  const response = await fetch(serviceUrl(base, path), { headers: { accept: 'application/json' } });
  if (!response.ok) throw new Error(`GET /${path} answered ${response.status}`);
  return response.json() as Promise<unknown>;
}

async function getBytes(base: string, path: string): Promise<Uint8Array | undefined> {
  const response = await fetch(serviceUrl(base, path));
  if (response.status === 404) return undefined;
  if (!response.ok) throw new Error(`GET /${path} answered ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function toBase64(bytes: Uint8Array): string {
  let text = '';
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text);
}

function hpkeCheck(doc: AttestationDocumentV2, served: Uint8Array | undefined): PageCheck {
  const attested = doc.binding.hpke_key_config;
  if (attested === null) {
    return page('binding.hpke', 'note', 'the service does not offer encrypted bodies (EHBP): a load balancer in front of it could read chats');
  }
  if (served === undefined) return page('binding.hpke', 'fail', 'the binding names an HPKE key, but /.well-known/hpke-keys serves none');
  return toBase64(served) === attested
    ? page('binding.hpke', 'pass', `/.well-known/hpke-keys serves exactly the attested key configuration (${served.length} bytes)`)
    : page('binding.hpke', 'fail', '/.well-known/hpke-keys serves another key than the attested one: the page will not encrypt to it');
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

/**
 * The document's GPU evidence through the verifier `sigil verify` and the attested client use, with this page's nonce,
 * the NVIDIA roots compiled into the bundle and the RIMs the user loaded. Reference values that name RIMs the page
 * was not given fail `gpu.rims`: the page cannot read paths, and comparing with nothing is not a pass.
 */
function gpuChecks(doc: AttestationDocumentV2, nonce: Uint8Array, options: VerifyServiceOptions): Check[] | null {
  const entries: unknown = doc.gpu_evidence;
  if (!Array.isArray(entries)) return [fail('gpu.evidence', 'the attestation document has no gpu_evidence list, so nothing says which GPUs it covers')];
  const named = options.reference?.gpu?.rims ?? [];
  const loaded = options.rims ?? [];
  if (entries.length === 0 && named.length === 0 && loaded.length === 0) return null;
  const checks: Check[] = [];
  if (named.length > 0 && loaded.length === 0) {
    checks.push(fail('gpu.rims', `the reference values name ${named.length} RIM file(s) (${named.join(', ')}) but none was loaded into this page, so the GPU measurements cannot be compared with them`));
  }
  const bound: unknown = doc.binding.gpu_evidence_sha256;
  const result = verifyGpuEvidence(entries as AttestationDocumentV2['gpu_evidence'], {
    nonce,
    boundSha256: Array.isArray(bound) ? bound.map(String) : [],
    ...(loaded.length > 0 ? { rims: loaded.map((r) => r.text) } : {}),
  });
  return [...checks, ...result.checks];
}

/** A failed check outranks everything; then a development service says so; then whether the code was compared. */
function verdictOf(checks: PageCheck[], doc: AttestationDocumentV2 | undefined, unpinned: ReadonlySet<PageCheck>): Verdict {
  if (checks.some((c) => c.status === 'fail' && c.name !== 'attestation.tee')) return 'failed';
  if (doc?.tee === 'none') return 'development';
  return checks.some((c) => c.status === 'note' && unpinned.has(c)) ? 'unpinned' : 'verified';
}

/**
 * Verifies a Sigil service as a skeptical browser would: a fresh nonce, the attestation document, its
 * binding (JWKS, policy, HPKE key) recomputed here, the hardware evidence chain, and the reference values
 * the user gave. Nothing the service says about a check's outcome is taken on its word.
 */
export async function verifyService(base: string, options: VerifyServiceOptions = {}): Promise<ServiceReport> {
  const nonce = crypto.getRandomValues(new Uint8Array(32));
  let doc: AttestationDocumentV2;
  let jwks: { keys: unknown[] };
  let policy: unknown;
  let modelList: unknown;
  let hpke: Uint8Array | undefined;
  try {
    [doc, jwks, policy, modelList, hpke] = (await Promise.all([
      getJson(base, `v1/verify/attestation?nonce=${toHex(nonce)}`),
      getJson(base, 'v1/verify/jwks.json'),
      getJson(base, 'v1/verify/policy'),
      getJson(base, 'v1/models?detail=true'),
      getBytes(base, '.well-known/hpke-keys'),
    ])) as [AttestationDocumentV2, { keys: unknown[] }, unknown, unknown, Uint8Array | undefined];
  } catch (err) {
    return { verdict: 'failed', checks: [page('attestation.document', 'fail', `could not read the service: ${(err as Error).message}`)], models: [] };
  }
  const models = ((modelList as { data?: ModelRow[] }).data ?? []).map((m) => ({ ...m }));

  const checks: PageCheck[] = verifyJwksBinding(doc, { jwks, nonce }).map(fromCheck);
  const unpinned = new Set<PageCheck>();
  const policyHash = jcsSha256(policy);
  checks.push(
    doc.binding?.policy_hash === policyHash
      ? page('binding.policy', 'pass', `the published policy hashes to ${policyHash}, the attested policy_hash`)
      : page('binding.policy', 'fail', `the published policy hashes to ${policyHash}; the binding says ${String(doc.binding?.policy_hash)}`),
  );
  if (doc.binding === undefined) return { verdict: 'failed', checks, models };
  const hpkeLine = hpkeCheck(doc, hpke);
  checks.push(hpkeLine);
  checks.push(
    doc.binding.tls_spki_sha256 === null
      ? page('binding.tls', 'note', 'the service terminates no TLS itself: whatever serves this page\'s HTTPS sits outside the enclave')
      : page('binding.tls', 'note', `the enclave serves TLS key ${doc.binding.tls_spki_sha256}; a browser cannot show the page which key its connection used`),
  );
  const gpu = gpuChecks(doc, nonce, options);
  if (gpu === null) checks.push(page('binding.gpu', 'note', 'no GPU evidence: the service attests no GPU'));
  if (options.rims !== undefined && options.rims.length > 0) {
    checks.push(page('gpu.rims', 'note', `${options.rims.length} RIM file(s) loaded into this page: ${options.rims.map((r, k) => `${r.name} (gpu.rim[${k}])`).join(', ')}`));
  }
  for (const check of gpu ?? []) {
    const shown = fromCheck(check);
    // Revocation is never looked up offline (nor by `sigil verify`): a standing note, not a value left unpinned.
    if (isNotPinned(check) && !check.name.endsWith('.revocation')) unpinned.add(shown);
    checks.push(shown);
  }
  if (doc.tee === 'none') {
    checks.push(page('attestation.tee', 'fail', 'tee is "none": no hardware evidence exists, so nothing stops the operator from reading prompts (a development service)'));
  } else {
    // The same verifier as the CLI's: evidence, event-log replay, platform policy and the reference values given.
    const verified = await verifyAttestationDocument(doc, { jwks: jwks as { keys: object[] }, nonce, ...(options.reference === undefined ? {} : { reference: options.reference }) });
    for (const check of verified) {
      const shown = fromCheck(check);
      if (isNotPinned(check)) unpinned.add(shown);
      checks.push(shown);
    }
  }
  const report: ServiceReport = { verdict: verdictOf(checks, doc, unpinned), checks, document: doc, jwks, policyHash, models };
  if (hpkeLine.status === 'pass' && hpke !== undefined) report.hpkeKeyConfig = hpke;
  return report;
}
