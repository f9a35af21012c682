/** GPU evidence (NVIDIA SPDM reports and RIMs): the one verifier `sigil verify`, the attested client and the trust page (bundled for the browser) run. */
export { DEFAULT_GPU_TRUST_ROOTS, verifyGpuEvidence } from './gpu-verify.ts';
export type { GpuEvidenceVerification, GpuReportSummary, GpuTrustRoots, VerifyGpuEvidenceOptions } from './gpu-verify.ts';
export { compareWithRims } from './measurements.ts';
export type { MeasurementComparison, MeasurementMismatch } from './measurements.ts';
export { verifyRim } from './rim.ts';
export type { Rim, RimMeasurement, RimVerification } from './rim.ts';
export { readSpdmMeasurementReport } from './spdm-measurements.ts';
export type { SpdmMeasurementBlock, SpdmMeasurementReport } from './spdm-measurements.ts';
export { certificateFwid, readDeviceCertificates } from './device-certificates.ts';
export { formatVbiosVersion, readOpaqueFields } from './opaque-data.ts';
export type { GpuFirmwareInfo, OpaqueField } from './opaque-data.ts';
export { GpuEvidenceError } from './errors.ts';
export type { GpuEvidenceErrorCode } from './errors.ts';
export { readOcspBundle, revocationCheck } from './ocsp.ts';
export type { OcspBundle, OcspCheckOptions, RecordedOcspResponse } from './ocsp.ts';
export { CollateralFetchError, fetchNvidiaCollateral, NVIDIA_OCSP_SERVICE, NVIDIA_RIM_SERVICE, ocspRequestFor, rimIdsForReport } from './collateral-fetch.ts';
export type { NvidiaCollateral, NvidiaCollateralOptions, NvidiaCollateralRequest } from './collateral-fetch.ts';
