import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { GpuEvidence } from '../protocol/attestation.ts';
import { verifyGpuEvidence, type GpuReportSummary, type GpuTrustRoots } from '../verify/gpu/index.ts';
import { verifyAttestationDocument, type TrustRoots, type VerifyAttestationOptions } from '../verify/attestation.ts';
import type { ReferenceValues } from '../verify/reference/reference-values.ts';
import { evidenceBytes, verifyJwksBinding } from '../verify/binding.ts';
import { fail, pass, type Check } from '../verify/check.ts';
import { canonicalPolicyHash, sha256Tagged } from '../verify/digest.ts';
import { fetchStartAttestation, fetchVerificationMaterial } from '../verify/service.ts';
import { acceptDevelopmentPlaintext, pinnedAgent, SpkiPin, tlsBindingCheck } from '../verify/tls-pin.ts';
import { fetchHpkeKeyConfig, hpkeBindingCheck } from '../verify/hpke-binding.ts';

export interface AttestOptions {
  baseURL: string;
  reference?: ReferenceValues | undefined;
  allowNoTee: boolean;
  roots?: TrustRoots | undefined;
  /** NVIDIA's device identity and RIM roots; the built-in ones unless a test brings its own. */
  gpuRoots?: GpuTrustRoots | undefined;
  ca?: string | undefined;
  /** The nonce to send; default 32 fresh random bytes. A nonce the caller chose proves freshness only if nobody else knew it. */
  nonce?: Uint8Array | undefined;
}

/** A verified attestation: what every later request and receipt is held to. */
export interface Attested {
  tee: 'sev-snp' | 'tdx' | 'none';
  measurement: string;
  /** The TLS key the enclave attests, when the connection presented it (TLS ends in the enclave); else null. */
  tlsSpkiSha256: string | null;
  /** The attested HPKE key config (EHBP): bodies are sealed to it; null when the service offers none. */
  hpkeKeyConfig: Uint8Array | null;
  jwks: { keys: unknown[] };
  policyHash: string;
  /** `"sha256:" + hex` of the start evidence, which receipts name; undefined without hardware. */
  attestationHash: string | undefined;
  /** Each GPU whose report the document carries and could be read: its driver and VBIOS versions and measurements (`checks` say whether they verified). */
  gpus: GpuReportSummary[];
  checks: Check[];
  at: Date;
}

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined;
}

/**
 * Fetches the attestation with a fresh nonce over a connection pinned to the key it presents, and verifies
 * it: the hardware evidence and its chain, the binding of our nonce, the JWKS and the TLS key, and the
 * measurement against the caller's reference values. Every check is returned; `ok` only if all passed.
 */
export async function attest(options: AttestOptions): Promise<Attested & { ok: boolean }> {
  const nonce = options.nonce ?? randomBytes(32);
  const pin = new SpkiPin();
  const dispatcher = pinnedAgent(pin, { ca: options.ca });
  try {
    const material = await fetchVerificationMaterial(options.baseURL, nonce, dispatcher);
    const doc = material.attestation;
    const tee = field(doc, 'tee');
    const measurement = String(field(doc, 'measurement'));
    const attestedKey = field(field(doc, 'binding'), 'tls_spki_sha256');
    const url = new URL(options.baseURL);
    const checks: Check[] = [];
    const development = tee === 'none' && options.allowNoTee;
    // Encrypted bodies when offered and attested: then TLS need not end in the enclave (a load balancer may end it).
    const attestedHpke = field(field(doc, 'binding'), 'hpke_key_config');
    const servedHpke = typeof attestedHpke === 'string' ? await fetchHpkeKeyConfig(options.baseURL, dispatcher).catch((err: Error) => err) : undefined;
    const hpkeKey = hpkeBindingCheck(servedHpke, typeof attestedHpke === 'string' ? attestedHpke : null);
    const tlsKey = tlsBindingCheck(url, pin.accepted, typeof attestedKey === 'string' ? attestedKey : null);
    if (tlsKey.ok) checks.push(tlsKey);
    else if (hpkeKey.ok) checks.push(pass(tlsKey.name, `not needed: ${tlsKey.detail}; every body is sealed to the attested HPKE key instead`));
    else checks.push(acceptDevelopmentPlaintext(tlsKey, url, tee, options.allowNoTee ? 'allowNoTee' : undefined));
    if (typeof attestedHpke === 'string') checks.push(hpkeKey);
    checks.push(...verifyJwksBinding(doc, { jwks: material.jwks, nonce }));
    let attestationHash: string | undefined;
    if (tee === 'none') {
      checks.push(development ? pass('attestation.tee', 'tee is "none": a development service with no hardware evidence (accepted because allowNoTee)') : fail('attestation.tee', 'tee is "none": no hardware evidence exists, this service is not running in a TEE'));
    } else {
      const verifyOptions: VerifyAttestationOptions = { jwks: material.jwks as { keys: object[] }, nonce };
      if (options.roots !== undefined) verifyOptions.roots = options.roots;
      if (options.reference !== undefined) verifyOptions.reference = options.reference;
      checks.push(...(await verifyAttestationDocument(doc, verifyOptions)));
      const start = evidenceBytes(await fetchStartAttestation(options.baseURL, dispatcher));
      attestationHash = start === undefined ? undefined : sha256Tagged(start);
    }
    const gpu = await gpuAttestationChecks(doc, nonce, options.reference, options.gpuRoots);
    checks.push(...gpu.checks);
    const policyHash = canonicalPolicyHash(material.policy);
    const bound = field(field(doc, 'binding'), 'policy_hash');
    checks.push(
      policyHash === bound
        ? pass('attestation.policy', `the policy served is the one the enclave binds (${policyHash})`)
        : fail('attestation.policy', `the policy served hashes to ${policyHash}, the enclave binds ${String(bound)}`),
    );
    return {
      ok: checks.every((c) => c.ok),
      tee: tee as Attested['tee'],
      measurement,
      tlsSpkiSha256: tlsKey.ok && typeof attestedKey === 'string' ? attestedKey : null,
      hpkeKeyConfig: hpkeKey.ok && servedHpke instanceof Uint8Array ? servedHpke : null,
      jwks: material.jwks,
      policyHash,
      attestationHash,
      gpus: gpu.gpus,
      checks,
      at: new Date(),
    };
  } finally {
    await dispatcher.close();
  }
}

/**
 * The document's GPU evidence (SPEC 10): each entry's SPDM report verified for the nonce we sent, against the hashes
 * the binding lists and the RIMs of `reference.gpu.rims`. No GPU evidence is one check saying so, a failure only
 * when the reference values pin RIMs. A RIM file that cannot be read fails `gpu.rims`.
 */
export async function gpuAttestationChecks(
  doc: unknown,
  nonce: Uint8Array,
  reference: ReferenceValues | undefined,
  roots: GpuTrustRoots | undefined,
  at: Date = new Date(),
): Promise<{ checks: Check[]; gpus: GpuReportSummary[] }> {
  const entries = field(doc, 'gpu_evidence');
  if (!Array.isArray(entries)) return { checks: [fail('gpu.evidence', 'the attestation document has no gpu_evidence list, so nothing says which GPUs it covers')], gpus: [] };
  const checks: Check[] = [];
  const rims: string[] = [];
  for (const path of reference?.gpu?.rims ?? []) {
    try {
      rims.push(await readFile(path, 'utf8'));
    } catch (err) {
      checks.push(fail('gpu.rims', `the RIM ${path} named by the reference values cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}), so the GPU measurements cannot be compared with it`));
    }
  }
  const bound = field(field(doc, 'binding'), 'gpu_evidence_sha256');
  const options: Parameters<typeof verifyGpuEvidence>[1] = { nonce, at };
  if (entries.length > 0 || !Array.isArray(bound) || bound.length > 0) options.boundSha256 = Array.isArray(bound) ? bound.map(String) : [];
  if (rims.length > 0 || (reference?.gpu?.rims?.length ?? 0) > 0) options.rims = rims;
  if (roots !== undefined) options.roots = roots;
  const result = verifyGpuEvidence(entries as GpuEvidence[], options);
  return { checks: [...checks, ...result.checks], gpus: result.gpus };
}
