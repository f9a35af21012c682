/**
 * `sigil/verify`, the client-side verifier's public API (src/verify/README.md#the-public-api): the core, the
 * readers an auditor needs, their types and the error classes. Importable on its own, with nothing from the
 * server side. Everything else is internal: Sigil's own callers import the modules directly. The list is
 * pinned by test/verify/public-api.test.ts, so adding a name is a decision.
 */

// The core: one verification of a service, its verdict, the check registry and the verdict as an EAR.
export { verifyService } from './verify-service.ts';
export type { ServiceEvidence, ServiceExpectations, ServiceFacts, ServiceVerification, Waivers } from './verify-service.ts';
export { checkMark, isNotPinned, isWaived, verdictOf } from './check.ts';
export type { Check, CheckMark, Verdict, VerdictOutcome } from './check.ts';
export { CHECKS, describeCheck } from './check-registry.ts';
export type { CheckDeclaration } from './check-registry.ts';
export { toEar } from './ear.ts';
export type { Ear, EarOptions } from './ear.ts';

// Receipts and the attestation document.
export { verifyReceipt } from './receipt.ts';
export type { ReceiptExpectations, ReceiptVerification, RequiredExpectation, VerifyReceiptOptions } from './receipt.ts';
export { splitReceiptStream } from './stream-receipt.ts';
export type { SplitStream } from './stream-receipt.ts';
export { canonicalPolicyHash } from './digest.ts';
export type { ReceiptClaims, SelectedModel, Tee } from './claims.ts';
export { DEFAULT_TRUST_ROOTS, verifyAttestationDocument } from './attestation.ts';
export type { TrustRoots, VerifyAttestationOptions } from './attestation.ts';

// Raw hardware evidence: readers and verifiers for an auditor's own files.
export { readSnpReport } from './evidence/snp-report.ts';
export type { SnpReport } from './evidence/snp-report.ts';
export { readTdxQuote } from './evidence/tdx-quote.ts';
export type { TdxQuote } from './evidence/tdx-quote.ts';
export { verifySnpEvidence } from './evidence/snp-verify.ts';
export { verifyTdxEvidence, verifyTdxEvidenceWithCollateral } from './evidence/tdx-verify.ts';
export { readCcelEventLog, readCcelTable } from './evidence/event-log/ccel.ts';
export { verifyTdxEventLog } from './evidence/event-log/tdx-event-log.ts';
export type { TdxEventLogInput, TdxEventLogResult } from './evidence/event-log/tdx-event-log.ts';
export { readCollateralBundle, readCollateralDirectory } from './evidence/collateral/bundle.ts';
export type { CollateralBundle } from './evidence/collateral/bundle.ts';
export { verifyIntelCollateral } from './evidence/collateral/intel-collateral.ts';
export type { CollateralResult, IntelCollateral } from './evidence/collateral/intel-collateral.ts';
export { DEFAULT_GPU_TRUST_ROOTS, verifyGpuEvidence } from './gpu/index.ts';
export type { GpuEvidenceVerification, GpuTrustRoots, VerifyGpuEvidenceOptions } from './gpu/index.ts';
export { readSpdmMeasurementReport } from './gpu/spdm-measurements.ts';
export type { SpdmMeasurementReport } from './gpu/spdm-measurements.ts';

// Reference values and signed releases.
export { parseReferenceValues } from './reference/reference-values.ts';
export type { GpuReferenceValues, ReferenceValues, SnpReferenceValues, TdxReferenceValues } from './reference/reference-values.ts';
export { readReferenceValues } from './reference/load.ts';
export { verifyRelease } from './release/verify-release.ts';
export { withReleaseValues } from './release/reference-from-release.ts';
export type { ReleaseVerification } from './release/verify-release.ts';
export type { KeyReleaseTrust, ReleaseTrust, SigstoreReleaseTrust } from './release/trust.ts';
export type { ReleaseStatement } from './release/manifest.ts';

// Errors: one hierarchy under SigilError; branch on `code` or `instanceof`, never on the message.
export { isSigilError, SigilError } from '../protocol/sigil-error.ts';
export { VerifyError } from './errors.ts';
export type { VerifyErrorCode } from './errors.ts';
export { EvidenceError } from './evidence/errors.ts';
export type { EvidenceErrorCode } from './evidence/errors.ts';
export { GpuEvidenceError } from './gpu/errors.ts';
export type { GpuEvidenceErrorCode } from './gpu/errors.ts';
export { ReferenceValuesError } from './reference/reference-values.ts';
export { ReleaseError, type ReleaseErrorCode } from './release/errors.ts';
export { ReleaseManifestError } from './release/manifest.ts';
export { TlsPinError } from './tls-pin.ts';
