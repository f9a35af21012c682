import { describe, expect, it } from 'vitest';
import * as api from '../../src/verify/index.ts';
import { LaunchDigest } from '../../src/measure/gctx.ts';
import { MeasureError } from '../../src/measure/errors.ts';
import { readDcapQvlCollateral } from '../../src/verify/evidence/collateral/bundle.ts';
import { UsageError } from '../../src/cli/cli-errors.ts';

/** What sigil/verify exports at run time (types are erased). Growing this list is a decision: say why in src/verify/README.md. */
const PUBLIC_API = [
  'CHECKS',
  'DEFAULT_GPU_TRUST_ROOTS',
  'DEFAULT_TRUST_ROOTS',
  'EvidenceError',
  'GpuEvidenceError',
  'ReferenceValuesError',
  'ReleaseError',
  'ReleaseManifestError',
  'SigilError',
  'TlsPinError',
  'VerifyError',
  'canonicalPolicyHash',
  'checkMark',
  'describeCheck',
  'isNotPinned',
  'isSigilError',
  'isWaived',
  'parseReferenceValues',
  'readCcelEventLog',
  'readCcelTable',
  'readCollateralBundle',
  'readCollateralDirectory',
  'readReferenceValues',
  'readSnpReport',
  'readSpdmMeasurementReport',
  'readTdxQuote',
  'splitReceiptStream',
  'toEar',
  'verdictOf',
  'verifyAttestationDocument',
  'verifyGpuEvidence',
  'verifyIntelCollateral',
  'verifyReceipt',
  'verifyRelease',
  'verifyService',
  'verifySnpEvidence',
  'verifyTdxEventLog',
  'verifyTdxEvidence',
  'verifyTdxEvidenceWithCollateral',
  'withReleaseValues',
];

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

describe('sigil/verify: a small public API', () => {
  it('exports exactly the core, the readers an auditor needs and the error classes', () => {
    expect(Object.keys(api).sort()).toEqual([...PUBLIC_API].sort());
  });
});

describe('one error hierarchy: every error the verifier, the measurement tool and the CLI throw is a SigilError with a stable code', () => {
  it('a truncated SEV-SNP report is an EvidenceError ERR_SNP_REPORT_TRUNCATED', () => {
    const err = thrown(() => api.readSnpReport(new Uint8Array(16)));
    expect(err).toBeInstanceOf(api.EvidenceError);
    expect(err).toBeInstanceOf(api.SigilError);
    expect(err).toMatchObject({ name: 'EvidenceError', code: 'ERR_SNP_REPORT_TRUNCATED' });
  });

  it('a truncated TDX quote is an EvidenceError ERR_TDX_QUOTE_TRUNCATED', () => {
    const err = thrown(() => api.readTdxQuote(new Uint8Array(16)));
    expect(api.isSigilError(err)).toBe(true);
    expect(err).toMatchObject({ name: 'EvidenceError', code: 'ERR_TDX_QUOTE_TRUNCATED' });
  });

  it('two bytes that are no SPDM measurement report are a GpuEvidenceError ERR_SPDM_MALFORMED', () => {
    const err = thrown(() => api.readSpdmMeasurementReport(new Uint8Array(2)));
    expect(err).toBeInstanceOf(api.GpuEvidenceError);
    expect(err).toBeInstanceOf(api.SigilError);
    expect(err).toMatchObject({ name: 'GpuEvidenceError', code: 'ERR_SPDM_MALFORMED' });
  });

  it('a reference-values file that is not YAML is a ReferenceValuesError ERR_REFERENCE_VALUES', () => {
    const err = thrown(() => api.parseReferenceValues('tdx: [unclosed'));
    expect(err).toBeInstanceOf(api.SigilError);
    expect(err).toMatchObject({ name: 'ReferenceValuesError', code: 'ERR_REFERENCE_VALUES' });
  });

  it('collateral that is not dcap-qvl JSON is an EvidenceError ERR_COLLATERAL, not a bare Error', () => {
    const err = thrown(() => readDcapQvlCollateral('not json'));
    expect(err).toBeInstanceOf(api.EvidenceError);
    expect(err).toMatchObject({ code: 'ERR_COLLATERAL', message: 'not JSON (dcap-qvl collateral) and not a directory' });
  });

  it('a launch digest seeded with the wrong length is a MeasureError ERR_MEASURE_INPUT, not a RangeError', () => {
    const err = thrown(() => new LaunchDigest(new Uint8Array(47)));
    expect(err).toBeInstanceOf(MeasureError);
    expect(err).toBeInstanceOf(api.SigilError);
    expect(err).toMatchObject({ name: 'MeasureError', code: 'ERR_MEASURE_INPUT', message: 'a launch digest seed is 48 bytes, got 47' });
  });

  it('a bad command line is a UsageError ERR_USAGE', () => {
    expect(new UsageError('--at is an RFC 3339 time')).toMatchObject({ name: 'UsageError', code: 'ERR_USAGE' });
    expect(new UsageError('x')).toBeInstanceOf(api.SigilError);
  });

  it('the subclasses keep their names and codes: VerifyError, TlsPinError, ReleaseManifestError', () => {
    expect(new api.VerifyError('ERR_RECEIPT_ALG')).toMatchObject({
      name: 'VerifyError',
      code: 'ERR_RECEIPT_ALG',
      message: 'the protected header alg is not ES256',
    });
    expect(new api.TlsPinError(undefined, [])).toMatchObject({ name: 'TlsPinError', code: 'ERR_VERIFY_TLS_PIN' });
    expect(new api.TlsPinError(undefined, [])).toBeInstanceOf(api.VerifyError);
    const manifest = new api.ReleaseManifestError('predicate.expires', 'must be a non-empty string');
    expect(manifest).toBeInstanceOf(api.ReleaseError);
    expect(manifest).toMatchObject({ name: 'ReleaseManifestError', code: 'ERR_RELEASE_MANIFEST', path: 'predicate.expires' });
  });
});
