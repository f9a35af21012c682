import { createHash } from 'node:crypto';
import { canonicalJson } from './jcs.ts';

/**
 * The attestation document v2 (docs/attestation.md) and its report data: the one definition the server builds
 * and the verifier checks, so the two can never drift apart.
 */

export type Tee = 'sev-snp' | 'tdx' | 'none';

export interface Jwks {
  keys: Array<Record<string, unknown>>;
}

/** The statement the enclave vouches for; its JCS SHA-256 is folded into REPORT_DATA. */
export interface AttestationBinding {
  /** The JWKS served at /v1/verify/jwks.json (the keys receipts verify against). */
  jwks: Jwks;
  /** `"sha256:" + hex` of the JCS policy document (docs/receipts.md). */
  policy_hash: string;
  /** Lowercase hex SHA-256 of the DER SubjectPublicKeyInfo of the TLS key this listener serves; null without TLS. */
  tls_spki_sha256: string | null;
  /** base64 of the exact bytes served at /.well-known/hpke-keys; null when encrypted bodies are off. */
  hpke_key_config: string | null;
  /** Lowercase hex SHA-256 of each `gpu_evidence` entry's raw report, in the same order. */
  gpu_evidence_sha256: string[];
  /** Lowercase hex SHA-384 of the manifest in force (docs/attestation.md, "The manifest"); null without hardware. */
  manifest_sha384: string | null;
  /** Where each private key came from: made in the enclave, loaded from a file, or sealed to the enclave. */
  key_origin: KeyOrigins;
  /** The digests of Sigil's runtime events, in order (the same list on TDX and SEV-SNP, where nothing else measures them). */
  runtime_events_sha384: string[];
  /** The transparency log's origin and checkpoint key (a C2SP signed-note verifier key); absent without a log (docs/log.md). */
  transparency_log?: TransparencyLogBinding;
}

export interface TransparencyLogBinding {
  origin: string;
  vkey: string;
}

/** `generated`: made in this enclave at start; `loaded`: read from a file the operator controls; `sealed`: derived by the TEE for this measurement. */
export type KeyOrigin = { origin: 'generated' } | { origin: 'loaded'; file: string } | { origin: 'sealed'; bound_to: string };

/** The origin of each private key the binding names; null for a key that is not in use. */
export interface KeyOrigins {
  receipt: KeyOrigin;
  tls: KeyOrigin | null;
  hpke: KeyOrigin | null;
  /** The transparency log's checkpoint key; absent without a log. */
  log?: KeyOrigin;
}

/** The payload of one runtime event: what was in force from `at` on (JCS; its SHA-384 is the event's digest). */
export interface RuntimeEventPayload {
  kind: typeof RUNTIME_EVENT_KIND;
  /** 0 for the first event this Sigil process recorded, then 1, 2, ... */
  seq: number;
  /** Why the state changed: Sigil started, or a reload swapped in new files. */
  reason: 'start' | 'reload';
  /** ISO 8601 time from which this state served requests. */
  at: string;
  /** Lowercase hex SHA-384 of the manifest text (what `sigil measure self` prints). */
  manifest_sha384: string;
  /** The policy hash receipts signed under this state carry. */
  policy_hash: string;
}

export const RUNTIME_EVENT_KIND = 'sigil-event/2';
/** The `event` name of Sigil's runtime events in the event log. */
export const RUNTIME_EVENT_NAME = 'sigil';

/** One runtime event Sigil extended into a TDX RTMR (its own code, configuration and policy). */
export interface RuntimeEvent {
  /** The measurement register index (RTMR3 for Sigil's own event). */
  imr: number;
  /** A short name of what was measured, e.g. "sigil". */
  event: string;
  /** Lowercase hex SHA-384 extended into the register: SHA-384 of `payload`'s UTF-8 bytes. */
  digest: string;
  /** The exact text whose SHA-384 is `digest` (JSON), so a verifier can read and recompute it. */
  payload: string;
}

/** The measured-boot log a verifier replays (docs/attestation.md); on SEV-SNP only Sigil's runtime events, bound through the binding. */
export interface EventLog {
  /** base64 of the CCEL ACPI table (/sys/firmware/acpi/tables/CCEL); null when the kernel exposes none. */
  ccel_table: string | null;
  /** base64 of the CCEL event log data (/sys/firmware/acpi/tables/data/CCEL); null when absent. */
  ccel_data: string | null;
  /** Sigil's runtime events (start, then each reload), in order. */
  runtime_events: RuntimeEvent[];
  /** Whether Sigil could extend RTMR3 with its own event, and if not, why (in words). */
  self_measurement: { extended: boolean; reason: string | null };
}

/** One attested GPU's SPDM evidence (docs/auditing.md), collected through NVML for the document's nonce. */
export interface GpuEvidence {
  /** NVML device index. */
  index: number;
  /** GPU architecture as NVML reports it, e.g. "hopper". */
  arch: string;
  /** base64 of the raw SPDM GET_MEASUREMENTS request followed by the response; its SHA-256 is bound. */
  report: string;
  /** base64 of the device certificate chain exactly as NVML returned it. */
  certificates: string;
  /** Lowercase hex of the 32-byte nonce the report answers. */
  nonce: string;
}

/** The body of GET /v1/verify/attestation. */
export interface AttestationDocumentV2 {
  version: 2;
  tee: Tee;
  /** Lowercase hex launch measurement (SNP MEASUREMENT, TDX MRTD); 48 zero bytes for none. */
  measurement: string;
  /** Lowercase hex of the 32 nonce bytes (all zero for the evidence made at start). */
  nonce: string;
  binding: AttestationBinding;
  /** Lowercase hex of the 64 bytes placed in the hardware report. */
  report_data: string;
  /** base64 of the raw evidence: the SNP report (1184 bytes) followed by its certificate table, or the TDX quote; null for none. */
  evidence: string | null;
  event_log: EventLog | null;
  gpu_evidence: GpuEvidence[];
}

export const ATTESTATION_DOCUMENT_VERSION = 2;
export const NONCE_BYTES = 32;
export const REPORT_DATA_LABEL = 'sigil-attestation-v2';
/** The size of an SEV-SNP attestation report, after which the certificate table follows in `evidence`. */
export const SNP_REPORT_BYTES = 1184;

/** The nonce of the evidence made at start. */
export const START_NONCE = new Uint8Array(NONCE_BYTES);

/** SHA-256 over the UTF-8 of JCS(binding): the digest REPORT_DATA commits to. */
export function bindingDigest(binding: AttestationBinding): Uint8Array {
  return createHash('sha256').update(canonicalJson(binding), 'utf8').digest();
}

/**
 * REPORT_DATA = SHA-512( "sigil-attestation-v2" || 0x00 || nonce (32 bytes) || SHA-256(JCS(binding)) ):
 * a fixed-length input behind a domain label, so no other protocol's report data reads as Sigil's.
 */
export function reportDataV2(nonce: Uint8Array, binding: AttestationBinding): Uint8Array {
  if (nonce.length !== NONCE_BYTES) throw new RangeError(`the nonce must be ${NONCE_BYTES} bytes, not ${nonce.length}`);
  return createHash('sha512').update(Buffer.from(REPORT_DATA_LABEL, 'utf8')).update(Buffer.of(0)).update(nonce).update(bindingDigest(binding)).digest();
}

/** Lowercase hex SHA-256 of a GPU evidence entry's raw report, as `gpu_evidence_sha256` lists it. */
export function gpuEvidenceSha256(entry: GpuEvidence): string {
  return createHash('sha256').update(Buffer.from(entry.report, 'base64')).digest('hex');
}

/** Splits an SEV-SNP `evidence` into the report and the certificate table that follows it. */
export function splitSnpEvidence(evidence: Uint8Array): { report: Uint8Array; certificates: Uint8Array } {
  return { report: evidence.subarray(0, SNP_REPORT_BYTES), certificates: evidence.subarray(SNP_REPORT_BYTES) };
}
