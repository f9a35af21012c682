import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Check } from '../../src/verify/check.ts';
import { readCollateralBundle } from '../../src/verify/evidence/collateral/bundle.ts';
import { matchTdxTcbLevel, verifyIntelCollateral } from '../../src/verify/evidence/collateral/intel-collateral.ts';
import { readTdxQuote } from '../../src/verify/evidence/tdx-quote.ts';
import { verifyTdxEvidenceWithCollateral } from '../../src/verify/evidence/tdx-verify.ts';
import { DEFAULT_TRUST_ROOTS } from '../../src/verify/evidence/trust-roots.ts';
import { parseReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { collateral } from './evidence/collateral/intel-collateral-steps.ts';

const dir = new URL('../vectors/tdx/', import.meta.url);
const vector = (name: string) => readFileSync(new URL(name, dir));
const quoteBytes = new Uint8Array(vector('spr-e4-quote.bin'));
const quote = readTdxQuote(quoteBytes);
// Inside every validity window of the sample collateral: TCB info 2023-06-18..07-18, QE identity and PCK CRL 06-08..07-08.
const IN_2023 = new Date('2023-06-20T00:00:00Z');
const TODAY = new Date('2026-11-24T00:00:00Z');
const byName = (checks: Check[]) => Object.fromEntries(checks.map((c) => [c.name, c.ok]));
const detail = (checks: Check[], name: string) => checks.find((c) => c.name === name)?.detail;

describe("Intel's real collateral for the Sapphire Rapids quote", () => {
  it('verifies offline at a time in 2023: signatures up to the built-in root, validity, FMSPC, QE identity, CRLs', async () => {
    const { checks, verdict } = await verifyIntelCollateral(quote, collateral(), DEFAULT_TRUST_ROOTS, IN_2023);
    expect(byName(checks)).toEqual({
      'collateral.root_crl': true,
      'collateral.tcb_signing_chain': true,
      'collateral.tcb_info': true,
      'tdx.module_identity': true,
      'collateral.qe_identity': true,
      'collateral.pck_crl': true,
    });
    expect(detail(checks, 'collateral.tcb_info')).toBe(
      "Intel's TDX TCB info for FMSPC 50806f000000 (evaluation 15, 2 levels) is signed by Intel SGX TCB Signing and current at 2023-06-20T00:00:00.000Z (next update 2023-07-18T08:42:58Z)",
    );
    expect(detail(checks, 'collateral.qe_identity')).toBe(
      "the Quoting Enclave is Intel's TD QE (ISV SVN 4, status UpToDate since 2023-02-15T00:00:00Z); the QE identity is signed by Intel SGX TCB Signing and current at 2023-06-20T00:00:00.000Z",
    );
    expect(detail(checks, 'collateral.pck_crl')).toBe(
      'the PCK certificate (serial bba6c175d838b8df...) is not among the 44 certificates Intel SGX PCK Platform CA revoked (CRL signed, current at 2023-06-20T00:00:00.000Z)',
    );
    // The sample TCB info lists levels above this machine's SGX components (3.3.2.2.2.1.0.2 against 5.5.2.2.3.1.0.3): no level matches, as go-tdx-guest also finds.
    expect(verdict).toEqual({
      status: null,
      advisoryIds: [],
      source:
        "no TCB level of Intel's TCB info for FMSPC 50806f000000 is met by this platform (PCK SGX components 3.3.2.2.2.1.0.2.0.0.0.0.0.0.0.0, PCESVN 11, TEE_TCB_SVN 03000400000000000000000000000000): its TCB is older than any Intel supports",
    });
  });

  it('fails today: the TCB signing certificate expired in 2025 and the collateral is stale', async () => {
    const { checks } = await verifyIntelCollateral(quote, collateral(), DEFAULT_TRUST_ROOTS, TODAY);
    expect(byName(checks)).toEqual({
      'collateral.root_crl': false,
      'collateral.tcb_signing_chain': false,
      'collateral.tcb_info': false,
      'collateral.qe_identity': false,
      'collateral.pck_crl': false,
    });
    expect(detail(checks, 'collateral.tcb_signing_chain')).toBe(
      "Intel SGX TCB Signing is not valid at 2026-11-24T00:00:00.000Z (valid 2018-05-21T10:50:10.000Z to 2025-05-21T10:50:10.000Z): Intel's TCB info and QE identity cannot be trusted at this time",
    );
    expect(detail(checks, 'collateral.tcb_info')).toBe('not checked: no trusted TCB signing certificate');
  });

  it('fails a TCB info whose signed bytes were changed (one status rewritten)', async () => {
    const c = collateral();
    c.tcbInfo = c.tcbInfo!.replace('"tcbStatus":"OutOfDate"', '"tcbStatus":"UpToDate"');
    const { checks, verdict } = await verifyIntelCollateral(quote, c, DEFAULT_TRUST_ROOTS, IN_2023);
    expect(detail(checks, 'collateral.tcb_info')).toBe('the TCB info signature does not verify with the Intel SGX TCB Signing key: it was changed or forged');
    expect(verdict.status).toBeNull();
  });

  it('fails a QE identity whose signature was changed', async () => {
    const c = collateral();
    c.qeIdentity = c.qeIdentity!.replace('"signature":"b6', '"signature":"b7');
    expect(byName((await verifyIntelCollateral(quote, c, DEFAULT_TRUST_ROOTS, IN_2023)).checks)['collateral.qe_identity']).toBe(false);
  });

  it('fails a PCK CRL that is not signed by its issuer (one byte of its signature flipped)', async () => {
    const c = collateral();
    const crl = Uint8Array.from(c.pckCrl!);
    crl[crl.length - 5] = crl[crl.length - 5]! ^ 0x01;
    c.pckCrl = crl;
    expect(detail((await verifyIntelCollateral(quote, c, DEFAULT_TRUST_ROOTS, IN_2023)).checks, 'collateral.pck_crl')).toBe(
      'the PCK CRL is not signed by Intel SGX PCK Platform CA',
    );
  });

  it('names each missing file', async () => {
    const { checks } = await verifyIntelCollateral(quote, {}, DEFAULT_TRUST_ROOTS, IN_2023);
    expect(checks.map((c) => [c.name, c.detail])).toEqual([
      ['collateral.root_crl', 'not checked: the bundle has no root-crl.der'],
      ['collateral.tcb_signing_chain', 'not checked: the bundle has no tcb-signing-chain.pem'],
      ['collateral.tcb_info', 'not checked: the bundle has no tcbinfo.json'],
      ['collateral.qe_identity', 'not checked: the bundle has no qeidentity.json'],
      ['collateral.pck_crl', 'not checked: the bundle has no pck-crl.der'],
    ]);
  });
});

describe("Intel's TCB level matching on the real TCB info", () => {
  const tcbInfo = (JSON.parse(vector('intel-tcbinfo-response.json').toString('utf8')) as { tcbInfo: { tcbLevels: Parameters<typeof matchTdxTcbLevel>[0] } })
    .tcbInfo;
  const svn = Uint8Array.from([3, 0, 5, ...new Array(13).fill(0)]);
  const comps = [5, 5, 2, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0];

  it('picks the first level the platform meets, with its status and advisories', () => {
    expect(matchTdxTcbLevel(tcbInfo.tcbLevels, { compSvn: comps, pceSvn: 11 }, svn)).toMatchObject({ tcbStatus: 'UpToDate', tcbDate: '2023-02-15T00:00:00Z' });
    expect(matchTdxTcbLevel(tcbInfo.tcbLevels, { compSvn: comps, pceSvn: 10 }, svn)).toMatchObject({
      tcbStatus: 'OutOfDate',
      advisoryIDs: expect.arrayContaining(['INTEL-SA-00106', 'INTEL-SA-00477']),
    });
    expect(matchTdxTcbLevel(tcbInfo.tcbLevels, { compSvn: comps, pceSvn: 11 }, Uint8Array.from([2, ...new Array(15).fill(0)]))).toBeUndefined();
  });
});

describe('a collateral bundle directory', () => {
  it('is read by its documented file names and decides tdx.tcb_status', async () => {
    const bundle = mkdtempSync(join(tmpdir(), 'sigil-collateral-'));
    try {
      const copy = (from: string, to: string) => cpSync(new URL(from, dir), join(bundle, to));
      copy('intel-tcbinfo-response.json', 'tcbinfo.json');
      copy('intel-qeidentity-response.json', 'qeidentity.json');
      copy('intel-tcb-signing-chain.pem', 'tcb-signing-chain.pem');
      copy('intel-pck-crl.der', 'pck-crl.der');
      copy('intel-pck-crl-issuer-chain.pem', 'pck-crl-issuer-chain.pem');
      copy('intel-root-crl.der', 'root-crl.der');
      const read = await readCollateralBundle(bundle);
      expect(read).toEqual(collateral());
      const { checks } = await verifyTdxEvidenceWithCollateral(
        quoteBytes,
        DEFAULT_TRUST_ROOTS,
        IN_2023,
        parseReferenceValues('tdx:\n  tcb_status: [UpToDate, OutOfDate]\n').tdx,
        read,
      );
      expect(checks.find((c) => c.name === 'tdx.tcb_status')).toEqual({
        name: 'tdx.tcb_status',
        ok: false,
        detail:
          "Intel's TCB status could not be established: no TCB level of Intel's TCB info for FMSPC 50806f000000 is met by this platform (PCK SGX components 3.3.2.2.2.1.0.2.0.0.0.0.0.0.0.0, PCESVN 11, TEE_TCB_SVN 03000400000000000000000000000000): its TCB is older than any Intel supports",
      });
    } finally {
      rmSync(bundle, { recursive: true, force: true });
    }
  });
});
