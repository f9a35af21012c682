import { createHash } from 'node:crypto';
import {
  ATTESTATION_DOCUMENT_VERSION,
  gpuEvidenceSha256,
  reportDataV2,
  type AttestationBinding,
  type AttestationDocumentV2,
  type EventLog,
  type GpuEvidence,
  type Jwks,
  type KeyOrigins,
  type TransparencyLogBinding,
} from '../protocol/attestation.ts';
import type { AttestationProvider, RawEvidence } from './provider.ts';

export type { AttestationDocumentV2, Jwks } from '../protocol/attestation.ts';

/** What the binding states besides the GPU evidence: each feature supplies its own part. */
export interface BindingParts {
  jwks: Jwks;
  policyHash: string;
  /** Lowercase hex SHA-256 of the served TLS key's SPKI; null without TLS. */
  tlsSpkiSha256: string | null;
  /** base64 of the exact /.well-known/hpke-keys bytes; null when encrypted bodies are off. */
  hpkeKeyConfig: string | null;
  /** The transparency log's origin and checkpoint key; absent without a log. */
  transparencyLog?: TransparencyLogBinding;
}

/**
 * Where the evidence comes from: the CPU provider, the GPUs (for the same nonce), the event log, the manifest in force
 * and the keys' origins. A reload replaces `eventLog` and `manifestSha384` in place, so fresh documents state them.
 */
export interface EvidenceSources {
  provider: AttestationProvider;
  collectGpuEvidence(nonce: Uint8Array): Promise<GpuEvidence[]>;
  eventLog: EventLog | null;
  /** Lowercase hex SHA-384 of the manifest in force (without hardware: as the process computed it, vouched for by nothing); null when none was computed. */
  manifestSha384?: string | null;
  /** Absent: the keys are declared loaded from an unnamed file, which every verifier fails (never a silent pass). */
  keyOrigin?: KeyOrigins;
}

const UNDECLARED_KEYS: KeyOrigins = { receipt: { origin: 'loaded', file: '(not declared)' }, tls: null, hpke: null };

export const NO_GPUS: EvidenceSources['collectGpuEvidence'] = async () => [];

export interface MadeDocument {
  document: AttestationDocumentV2;
  raw: RawEvidence;
}

/** The raw evidence as the document carries it: the SNP report followed by its certificate table, or the TDX quote. */
function evidenceBase64(raw: RawEvidence): string | null {
  if (raw.tee === 'none') return null;
  const bytes = raw.tee === 'sev-snp' ? Buffer.concat([raw.outblob, raw.auxblob]) : Buffer.from(raw.outblob);
  return bytes.toString('base64');
}

/**
 * Collects the GPUs' evidence and the CPU evidence for `nonce`, with REPORT_DATA committing to the
 * binding (docs/attestation.md#the-binding), and returns the attestation document v2.
 */
export async function makeAttestationDocument(sources: EvidenceSources, parts: BindingParts, nonce: Uint8Array): Promise<MadeDocument> {
  const gpu = await sources.collectGpuEvidence(nonce);
  const binding: AttestationBinding = {
    jwks: parts.jwks,
    policy_hash: parts.policyHash,
    tls_spki_sha256: parts.tlsSpkiSha256,
    hpke_key_config: parts.hpkeKeyConfig,
    gpu_evidence_sha256: gpu.map(gpuEvidenceSha256),
    manifest_sha384: sources.manifestSha384 ?? null,
    key_origin: sources.keyOrigin ?? UNDECLARED_KEYS,
    runtime_events_sha384: (sources.eventLog?.runtime_events ?? []).map((e) => e.digest),
    ...(parts.transparencyLog === undefined ? {} : { transparency_log: parts.transparencyLog }),
  };
  const raw = await sources.provider.collect(reportDataV2(nonce, binding));
  const document: AttestationDocumentV2 = {
    version: ATTESTATION_DOCUMENT_VERSION,
    tee: raw.tee,
    measurement: raw.measurement,
    nonce: Buffer.from(nonce).toString('hex'),
    binding,
    report_data: Buffer.from(raw.reportData).toString('hex'),
    evidence: evidenceBase64(raw),
    event_log: sources.eventLog,
    gpu_evidence: gpu,
  };
  return { document, raw };
}

/** The `attestation_hash` claim: SHA-256 of the start document's `evidence` bytes; absent without hardware. */
export function attestationHash(document: AttestationDocumentV2): string | undefined {
  if (document.evidence === null) return undefined;
  return 'sha256:' + createHash('sha256').update(Buffer.from(document.evidence, 'base64')).digest('hex');
}
