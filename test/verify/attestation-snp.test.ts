import { parseReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { beforeAll, describe, expect, it } from 'vitest';
import { verifyAttestationDocument } from '../../src/verify/attestation.ts';
import { checkMark, verdictOf, type Check } from '../../src/verify/check.ts';
import { START_NONCE } from '../../src/protocol/attestation.ts';
import { SNP_CERT_GUID } from '../../src/verify/evidence/snp-cert-table.ts';
import {
  amdCertTable,
  buildSnpCertTable,
  buildSnpReport,
  createAmdTestChain,
  snpDocument,
  testJwks,
  type AmdTestChain,
  expectedReportData,
  testBinding,
} from '../support/evidence-fixtures.ts';

const failing = (checks: Check[]) => checks.filter((c) => !c.ok).map((c) => c.name);
const names = (checks: Check[]) => checks.map((c) => c.name);

const ALL_SNP_CHECKS = [
  'snp.report',
  'snp.cert_table',
  'snp.report_signature',
  'snp.vcek_chain',
  'snp.root',
  'snp.crl',
  'snp.debug',
  'snp.migrate_ma',
  'snp.smt',
  'snp.vmpl',
  'snp.reported_tcb',
  'snp.launch_tcb',
  'snp.vcek_tcb',
  'snp.vcek_hwid',
  'snp.provisional_firmware',
  'snp.firmware_version',
  'snp.guest_policy',
  'snp.platform_info',
  'snp.id_block',
  'snp.instance',
  'snp.mitigation_vector',
  'snp.product',
  'attestation.report_data',
  'attestation.jwks',
  'attestation.measurement',
  'reference.values',
  'reference.measurement',
  'reference.host_data',
  'attestation.key_origin',
  'attestation.events',
  'attestation.manifest',
];

describe('SEV-SNP attestation document', () => {
  let chain: AmdTestChain;
  let foreign: AmdTestChain;
  const jwks = testJwks();
  const nonce = new Uint8Array(32).fill(0xab);
  const measurement = Buffer.alloc(48, 0x42);
  const measurementHex = measurement.toString('hex');
  const reportData = expectedReportData(nonce, jwks);

  beforeAll(async () => {
    chain = await createAmdTestChain();
    foreign = await createAmdTestChain('Foreign');
  });

  function validDocument(overrides: { measurement?: Uint8Array; reportData?: Uint8Array; policy?: bigint; chipId?: Uint8Array } = {}) {
    const report = buildSnpReport(
      { reportData: overrides.reportData ?? reportData, measurement: overrides.measurement ?? measurement, policy: overrides.policy, chipId: overrides.chipId },
      chain.vcekKey,
    );
    return { report, doc: snpDocument(report, amdCertTable(chain), nonce, jwks, measurementHex, reportData) };
  }

  it("the test chain is shaped like AMD's: RSA-PSS SHA-384 signatures, a P-384 VCEK", () => {
    expect([chain.ark.signatureAlgorithm, chain.ask.signatureAlgorithm, chain.vcek.signatureAlgorithm]).toEqual([
      { name: 'RSA-PSS', hash: { name: 'SHA-384' }, saltLength: 48 },
      { name: 'RSA-PSS', hash: { name: 'SHA-384' }, saltLength: 48 },
      { name: 'RSA-PSS', hash: { name: 'SHA-384' }, saltLength: 48 },
    ]);
    expect(chain.vcek.publicKey.algorithm).toMatchObject({ name: 'ECDSA', namedCurve: 'P-384' });
  });

  it('valid evidence passes every check, in order', async () => {
    const { doc } = validDocument();
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, expectedMeasurement: measurementHex, roots: chain.roots });
    expect(names(checks)).toEqual(ALL_SNP_CHECKS);
    expect(failing(checks)).toEqual([]);
  });

  it('fails REPORT_DATA when the caller gives no nonce, and checks the start evidence only when START_NONCE is given', async () => {
    const startData = expectedReportData(new Uint8Array(32), jwks);
    const report = buildSnpReport({ reportData: startData, measurement }, chain.vcekKey);
    const doc = snpDocument(report, amdCertTable(chain), new Uint8Array(32), jwks, measurementHex, startData);
    const unanchored = await verifyAttestationDocument(doc, { jwks, roots: chain.roots });
    expect(failing(unanchored)).toEqual(['attestation.report_data']);
    expect(unanchored.find((c) => c.name === 'attestation.report_data')?.detail).toBe(
      `the evidence's REPORT_DATA ${Buffer.from(startData).toString('hex')} was compared with nothing: no nonce was given, so nothing says this evidence is fresh or which keys it binds`,
    );
    const checks = await verifyAttestationDocument(doc, { jwks, nonce: START_NONCE, roots: chain.roots });
    expect(failing(checks)).toEqual([]);
    expect(checks.find((c) => c.name === 'attestation.report_data')?.detail).toContain('not fresh');
  });

  it('reports the measurement as NOT PINNED, never PASS, when nothing pins it', async () => {
    const { doc } = validDocument();
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    const check = checks.find((c) => c.name === 'attestation.measurement')!;
    expect(checkMark(check)).toBe('----');
    expect(check.detail).toBe(
      `MEASUREMENT ${measurementHex} equals the document's measurement, but no expected measurement or reference value pins it: nothing says it is the right code`,
    );
    expect(verdictOf(checks).outcome).toBe('not-verified');
  });

  it('a measurement flipped inside the signed report breaks the signature and the measurement match', async () => {
    const { report } = validDocument();
    report[0x90] = report[0x90]! ^ 0x01;
    const doc = snpDocument(report, amdCertTable(chain), nonce, jwks, measurementHex, reportData);
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, expectedMeasurement: measurementHex, roots: chain.roots });
    expect(failing(checks)).toEqual(['snp.report_signature', 'attestation.measurement']);
  });

  it('a correctly signed report of another measurement fails only the measurement check', async () => {
    const { doc } = validDocument();
    const other = 'ff'.repeat(48);
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, expectedMeasurement: other, roots: chain.roots });
    expect(failing(checks)).toEqual(['attestation.measurement']);
    expect(checks.find((c) => c.name === 'attestation.measurement')?.detail).toContain(other);
  });

  it('a document claiming a measurement the evidence does not carry fails the measurement check', async () => {
    const { doc } = validDocument();
    const checks = await verifyAttestationDocument({ ...doc, measurement: '00'.repeat(48) }, { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['attestation.measurement']);
  });

  it('a report whose REPORT_DATA binds other data fails the report data check', async () => {
    const { doc } = validDocument({ reportData: new Uint8Array(64).fill(7) });
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['attestation.report_data']);
  });

  it('evidence bound to another nonce fails the report data check; a binding of another JWKS fails the JWKS check', async () => {
    const { doc } = validDocument();
    const otherNonce = new Uint8Array(32).fill(0xcd);
    expect(failing(await verifyAttestationDocument(doc, { jwks, nonce: otherNonce, roots: chain.roots }))).toEqual(['attestation.report_data']);
    expect(failing(await verifyAttestationDocument(doc, { jwks: testJwks(), nonce, roots: chain.roots }))).toEqual(['attestation.jwks']);
    const swapped = { ...doc, binding: testBinding(testJwks()) };
    expect(failing(await verifyAttestationDocument(swapped, { jwks: swapped.binding.jwks, nonce, roots: chain.roots }))).toEqual(['attestation.report_data']);
  });

  it('a chain from a foreign root fails the root check', async () => {
    const report = buildSnpReport({ reportData, measurement }, foreign.vcekKey);
    const doc = snpDocument(report, amdCertTable(foreign), nonce, jwks, measurementHex, reportData);
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['snp.root', 'snp.crl']);
  });

  it('the real AMD roots are the default, and a test chain does not chain to them', async () => {
    const { doc } = validDocument();
    const checks = await verifyAttestationDocument(doc, { jwks, nonce });
    expect(failing(checks)).toEqual(['snp.root', 'snp.crl']);
    expect(checks.find((c) => c.name === 'snp.root')?.detail).toContain('ARK-Test');
  });

  it('a VCEK swapped for a foreign one fails the signature and the chain', async () => {
    const { report } = validDocument();
    const table = amdCertTable({ ...chain, vcek: foreign.vcek });
    const doc = snpDocument(report, table, nonce, jwks, measurementHex, reportData);
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['snp.report_signature', 'snp.vcek_chain', 'snp.root', 'snp.crl']);
  });

  it('a table with only the VCEK chains through the built-in signing keys', async () => {
    const { report } = validDocument();
    const table = buildSnpCertTable([
      { guid: SNP_CERT_GUID.vcek, der: new Uint8Array(chain.vcek.rawData) },
      { guid: SNP_CERT_GUID.crl, der: new Uint8Array(chain.crl.rawData) },
    ]);
    const doc = snpDocument(report, table, nonce, jwks, measurementHex, reportData);
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual([]);
    expect(checks.find((c) => c.name === 'snp.vcek_chain')?.detail).toContain('built-in');
  });

  it('a truncated report fails the report check and nothing is claimed beyond it', async () => {
    const { report } = validDocument();
    // The document's evidence is the report followed by the certificate table: evidence shorter than a report is truncated.
    const doc = snpDocument(report.subarray(0, 0x2a0), new Uint8Array(0), nonce, jwks, measurementHex, reportData);
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    expect(checks).toEqual([{ name: 'snp.report', ok: false, detail: 'ERR_SNP_REPORT_TRUNCATED: SEV-SNP report truncated: need 1184 bytes, have 672' }]);
  });

  it('a missing certificate table fails the table check and every check that needs the VCEK', async () => {
    const { report } = validDocument();
    const doc = snpDocument(report, new Uint8Array(32), nonce, jwks, measurementHex, reportData);
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['snp.cert_table', 'snp.report_signature', 'snp.vcek_chain', 'snp.root', 'snp.crl', 'snp.vcek_tcb', 'snp.vcek_hwid']);
  });

  it('a truncated certificate table fails the table check with its code', async () => {
    const { report } = validDocument();
    const doc = snpDocument(report, amdCertTable(chain).subarray(0, 30), nonce, jwks, measurementHex, reportData);
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    expect(checks.find((c) => c.name === 'snp.cert_table')?.detail).toMatch(/^ERR_SNP_CERT_TABLE_TRUNCATED: /);
  });

  it('a guest policy that allows debugging fails the debug check', async () => {
    const { doc } = validDocument({ policy: 0x30000n | (1n << 19n) });
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['snp.debug']);
    expect(checks.find((c) => c.name === 'snp.debug')?.detail).toBe(
      "guest policy 0xb0000 has DEBUG set: the host can read and change the guest's memory, so nothing in it is confidential",
    );
  });

  it('a report from another chip than the VCEK names fails the hwID check', async () => {
    const { report } = validDocument({ chipId: new Uint8Array(64).fill(0xc2) });
    const doc = snpDocument(report, amdCertTable(chain), nonce, jwks, measurementHex, reportData);
    const checks = await verifyAttestationDocument(doc, { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['snp.vcek_hwid']);
  });
});

describe('attestation documents without hardware', () => {
  it('tee none is one failing check that says there is no hardware evidence', async () => {
    const doc = {
      version: 2,
      tee: 'none',
      measurement: '0'.repeat(96),
      nonce: '00'.repeat(32),
      binding: testBinding({ keys: [] }),
      report_data: '',
      evidence: null,
      event_log: null,
      gpu_evidence: [],
    };
    expect(await verifyAttestationDocument(doc, { jwks: { keys: [] } })).toEqual([
      { name: 'attestation.tee', ok: false, detail: 'no hardware evidence: tee is none (development only)' },
      {
        name: 'attestation.manifest',
        ok: true,
        pinned: false,
        detail: `manifest ${'4d'.repeat(48)} is reported, not hardware-backed (tee none: only the process says so); compare it with what \`sigil measure self\` prints for this build and configuration`,
      },
    ]);
  });

  it('the manifest a development document reports is compared with the reference values, in words that say no hardware vouches for it', async () => {
    const doc = { version: 2, tee: 'none', measurement: '0'.repeat(96), nonce: '00'.repeat(32), binding: testBinding({ keys: [] }) };
    doc.binding = { ...doc.binding, manifest_sha384: 'ab'.repeat(48) };
    const against = async (pinned: string) =>
      (
        await verifyAttestationDocument(
          { ...doc, report_data: '', evidence: null, event_log: null, gpu_evidence: [] },
          {
            jwks: { keys: [] },
            reference: parseReferenceValues(`sigil:\n  manifest_sha384: ['${pinned}']\n`),
          },
        )
      ).find((c) => c.name === 'attestation.manifest');
    expect(await against('ab'.repeat(48))).toEqual({
      name: 'attestation.manifest',
      ok: true,
      detail: `manifest ${'ab'.repeat(48)} is reported, not hardware-backed (tee none: only the process says so); it is one the reference values accept, which no hardware confirms`,
    });
    expect(await against('cd'.repeat(48))).toEqual({
      name: 'attestation.manifest',
      ok: false,
      detail: `manifest ${'ab'.repeat(48)} is reported, not hardware-backed (tee none: only the process says so), and it is not among the reference values' ${'cd'.repeat(48)}: the process says it runs other code or configuration than the audited one`,
    });
  });

  it('a malformed document fails the document check', async () => {
    expect(failing(await verifyAttestationDocument('nope', { jwks: { keys: [] } }))).toEqual(['attestation.document']);
    expect(failing(await verifyAttestationDocument({ tee: 'sgx', measurement: '' }, { jwks: { keys: [] } }))).toEqual(['attestation.document']);
    expect(failing(await verifyAttestationDocument({ tee: 'sev-snp', measurement: 'aa', evidence: { report: 42 } }, { jwks: { keys: [] } }))).toEqual([
      'attestation.document',
    ]);
  });
});
