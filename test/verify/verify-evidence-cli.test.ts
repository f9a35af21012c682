import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { EvidenceExtension, EvidenceReport } from '../../src/cli/verify-evidence.ts';
import { fail } from '../../src/verify/check.ts';
import { runVerifyEvidence } from '../support/cli.ts';

const vectors = new URL('../vectors/', import.meta.url).pathname;
const v = (path: string) => join(vectors, path);
const work = mkdtempSync(join(tmpdir(), 'sigil-verify-evidence-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const file = (name: string, content: string | Uint8Array) => {
  writeFileSync(join(work, name), content);
  return join(work, name);
};

// dstack's Milan attestation is an envelope; the 1184-byte report starts at byte 4.
const milan = file('milan-report.bin', readFileSync(v('snp/dstack-milan-attestation.bin')).subarray(4, 4 + 1184));
const dstackJson = v('tdx/dstack-quote-and-eventlog.json');
const DSTACK_CONFIG_ID = '0186b0e55f2fa8e4fb69d890f14f54d5612707646e2573d54e0d2ddaaade77caa9000000000000000000000000000000';
const AT_2026 = new Date('2026-07-01T00:00:00Z');

const sigil = (argv: string[], extensions?: EvidenceExtension[]) => runVerifyEvidence(argv, AT_2026, extensions);

describe('sigil verify-evidence on SEV-SNP evidence', () => {
  it("passes dstack's Milan report with its VCEK and ASK, and prints the measured values", async () => {
    // REPORT_DATA compared with nothing and values nobody pinned: not verified, exit 1, until each is given or waived.
    const strict = await sigil(['--snp-report', milan, '--vcek', v('snp/dstack-milan-vcek.pem'), '--ask', v('snp/dstack-milan-ask.pem')]);
    expect(strict.code).toBe(1);
    expect(strict.marks).toMatchObject({ 'reference.values': '----', 'evidence.report_data': '----' });
    // No AMD CRL is current while this VCEK is valid (from 2026-06-17): snp.crl fails unless the reference values accept that.
    expect(strict.stdout.trimEnd().split('\n').at(-1)).toMatch(
      /^NOT VERIFIED: 1 of 26 checks failed; 14 not pinned, so compared with nothing \(.*evidence\.report_data.*\); the code was not compared with reference values$/,
    );
    const allowMissingCrl = file('allow-missing-crl.yaml', 'snp:\n  allow_missing_crl: true\n');
    const r = await sigil([
      '--snp-report',
      milan,
      '--vcek',
      v('snp/dstack-milan-vcek.pem'),
      '--ask',
      v('snp/dstack-milan-ask.pem'),
      '--reference',
      allowMissingCrl,
      '--allow-unbound-evidence',
      '--allow-unpinned-code',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('  measurement 7f51e17f72a04d5422cb2c00998166536019a217376f3aa45a630e59c805a599847ff250dbffcd07e1ba639771d6f05d\n');
    expect(r.marks).toMatchObject({
      'snp.report_signature': 'PASS',
      'snp.vcek_chain': 'PASS',
      'snp.vcek_tcb': 'PASS',
      'snp.vcek_hwid': 'PASS',
      'snp.debug': 'PASS',
      'snp.crl': 'WAIVED',
      'evidence.report_data': 'WAIVED',
    });
    expect(r.stdout).toContain('(waived: --allow-unbound-evidence: evidence neither fresh nor bound to anything is accepted)\n');
    expect(r.stdout.trimEnd().split('\n').at(-1)).toMatch(/^verified with waivers: 12 checks passed; 14 waived \(snp\.crl, .*\)$/);
  });

  it('gives the measured values and the verdict as JSON, and fails a pinned MEASUREMENT that differs', async () => {
    const reference = file(
      'snp-ref.yaml',
      `snp:\n  measurement: ${'00'.repeat(48)}\n  host_data: 783f0057820acb99249af56cc3b07b4e8d80f65183167cba9cf437bb680f742f\n`,
    );
    const r = await sigil(['--snp-report', milan, '--vcek', v('snp/dstack-milan-vcek.pem'), '--reference', reference, '--json']);
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as EvidenceReport;
    expect(report.verified).toBe(false);
    expect(report.tee).toBe('sev-snp');
    expect(report.measured).toMatchObject({
      measurement: '7f51e17f72a04d5422cb2c00998166536019a217376f3aa45a630e59c805a599847ff250dbffcd07e1ba639771d6f05d',
      vmpl: 0,
      reported_tcb: '0xd517000000000004',
    });
    expect(report.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['snp.crl', 'reference.measurement']);
    expect(report.checks.find((c) => c.name === 'reference.host_data')?.ok).toBe(true);
  });

  it("fails go-sev-guest's real DEBUG report on the debug check", async () => {
    const r = await sigil(['--snp-report', v('snp/go-sev-guest-debug-report.bin'), '--vcek', v('snp/go-sev-guest-debug-vcek.der')]);
    expect(r.code).toBe(1);
    expect(Object.entries(r.marks).filter(([, m]) => m === 'FAIL')).toEqual([
      ['snp.crl', 'FAIL'],
      ['snp.debug', 'FAIL'],
    ]);
  });

  it('fails every check needing the VCEK when none is given', async () => {
    const r = await sigil(['--snp-report', milan]);
    expect(r.code).toBe(1);
    expect(r.marks).toMatchObject({ 'snp.cert_table': 'FAIL', 'snp.report_signature': 'FAIL', 'snp.vcek_tcb': 'FAIL', 'snp.vcek_hwid': 'FAIL' });
  });
});

describe('sigil verify-evidence on TDX evidence', () => {
  const reference = file(
    'tdx-ref.yaml',
    `tdx:
  mr_config_id: ${DSTACK_CONFIG_ID}
  rtmr1: 2023546e7f3b9d1228e274f70c44d481162540f8452544520a796a52f06879709b81a824a26792a7822327504b0d2aee
  rtmr3: 6f24c170d0fd63fc2b1b53202eea47b013978437fa6982cf5e0438ff95c208994aaa0f4ebab2e3a66824b5b56869137e
`,
  );

  it("passes dstack's quote with its event log replayed and its reference values, listing the events", async () => {
    const r = await sigil([
      '--tdx-quote',
      dstackJson,
      '--event-log-json',
      dstackJson,
      '--reference',
      reference,
      '--allow-unbound-evidence',
      '--allow-unpinned-code',
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.marks).toMatchObject({
      'eventlog.rtmr0': 'PASS',
      'eventlog.rtmr3': 'PASS',
      'reference.rtmr1': 'PASS',
      'reference.rtmr3': 'PASS',
      'reference.mrtd': 'WAIVED',
      'tdx.mr_config_id': 'PASS',
    });
    expect(r.stdout).toContain(
      '  #22 RTMR3 DSTACK_RUNTIME_EVENT "compose-hash" 0bdd53f6ce1e789e... — measured data 86b0e55f2fa8e4fb69d890f14f54d5612707646e2573d54e0d2ddaaade77caa9\n',
    );
  });

  it('fails naming RTMR1 when the event log is tampered with', async () => {
    const doc = JSON.parse(readFileSync(dstackJson, 'utf8')) as { event_log: string };
    const events = JSON.parse(doc.event_log) as Array<{ imr: number; digest: string }>;
    const e = events.find((x) => x.imr === 1)!;
    e.digest = (e.digest[0] === '0' ? '1' : '0') + e.digest.slice(1);
    const tampered = file('tampered-log.json', JSON.stringify(events));
    const r = await sigil(['--tdx-quote', dstackJson, '--event-log-json', tampered, '--reference', reference, '--json']);
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as EvidenceReport;
    expect(report.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['eventlog.rtmr1']);
    expect(report.measured).toMatchObject({
      mrtd: 'fd685522ce791dfef67414614eb07d03fc07a32c5a66f36288b329dab92b724b1564c73d436ffb9ea84488c51ac5a1c5',
      mr_config_id: DSTACK_CONFIG_ID,
    });
    expect(report.events).toHaveLength(29);
  });

  it('replays the binary CCEL given as table and data (there is no quote for it, so the RTMRs differ)', async () => {
    const r = await sigil(['--tdx-quote', v('tdx/spr-e4-quote.bin'), '--ccel-data', v('tdx/dstack-ccel.bin'), '--at', '2023-06-20T00:00:00Z']);
    expect(r.marks).toMatchObject({ 'eventlog.parse': 'PASS', 'eventlog.rtmr0': 'FAIL', 'eventlog.rtmr3': 'PASS' });
    expect(r.stdout).toContain('  #14 RTMR1 EV_EFI_ACTION 77a0dab2312b4e1e... — measured data "Calling EFI Application from Boot Option"\n');
  });

  it("checks Intel's collateral bundle at a 2023 time, and fails it today", async () => {
    const bundle = join(work, 'collateral');
    for (const [from, to] of [
      ['intel-tcbinfo-response.json', 'tcbinfo.json'],
      ['intel-qeidentity-response.json', 'qeidentity.json'],
      ['intel-tcb-signing-chain.pem', 'tcb-signing-chain.pem'],
      ['intel-pck-crl.der', 'pck-crl.der'],
      ['intel-pck-crl-issuer-chain.pem', 'pck-crl-issuer-chain.pem'],
      ['intel-root-crl.der', 'root-crl.der'],
    ]) {
      cpSync(v(`tdx/${from!}`), join(bundle, to!));
    }
    const then = await sigil(['--tdx-quote', v('tdx/spr-e4-quote.bin'), '--collateral', bundle, '--at', '2023-06-20T00:00:00Z']);
    expect(then.marks).toMatchObject({
      'collateral.root_crl': 'PASS',
      'collateral.tcb_signing_chain': 'PASS',
      'collateral.tcb_info': 'PASS',
      'collateral.qe_identity': 'PASS',
      'collateral.pck_crl': 'PASS',
      'tdx.tcb_status': 'FAIL',
    });
    const today = await sigil(['--tdx-quote', v('tdx/spr-e4-quote.bin'), '--collateral', bundle, '--at', '2026-11-24T00:00:00Z']);
    expect(today.code).toBe(1);
    expect(today.marks).toMatchObject({ 'collateral.tcb_signing_chain': 'FAIL', 'collateral.tcb_info': 'FAIL', 'tdx.tcb_status': 'FAIL' });
  });
});

describe('sigil verify-evidence usage and inputs', () => {
  it('exits 2 on bad usage, naming the problem', async () => {
    expect((await sigil([])).stderr).toMatch(/^sigil verify-evidence: give --tdx-quote FILE, --snp-report FILE or --gpu-report FILE\n/);
    expect((await sigil(['--tdx-quote', dstackJson, '--ccel-table', milan])).stderr).toMatch(/--ccel-table needs --ccel-data/);
    expect((await sigil(['--tdx-quote', dstackJson, '--at', 'yesterday'])).code).toBe(2);
    expect((await sigil(['--snp-report', milan, '--tdx-quote', dstackJson])).code).toBe(2);
    expect((await sigil(['--snp-report', milan, '--frobnicate'])).code).toBe(2);
  });

  it('prints its usage for --help', async () => {
    const r = await sigil(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: sigil verify-evidence \[options\]\n/);
    expect(r.stdout).toMatch(/^ {2}--tdx-quote <FILE> +a TDX quote/m);
  });

  it('exits 3 when an input cannot be read, or a reference file is malformed (naming the key)', async () => {
    const missing = await sigil(['--snp-report', join(work, 'absent.bin'), '--json']);
    expect(missing.code).toBe(3);
    expect(JSON.parse(missing.stdout)).toEqual({
      verified: false,
      error: { code: 'ERR_EVIDENCE_UNREADABLE', message: `cannot read SEV-SNP report ${join(work, 'absent.bin')}: ENOENT` },
    });
    const bad = await sigil(['--snp-report', milan, '--reference', file('bad-ref.yaml', 'snp:\n  measurment: 00\n')]);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toBe(
      `sigil verify-evidence: could not verify: reference values ${join(work, 'bad-ref.yaml')}: snp.measurment: unknown key (did you mean 'measurement'?)\n`,
    );
  });

  it('runs extensions (the place for GPU evidence) with their own options', async () => {
    const gpu: EvidenceExtension = {
      name: 'gpu',
      options: { 'gpu-report': { type: 'string', value: 'FILE', description: 'a GPU report' } },
      wants: (values) => typeof values['gpu-report'] === 'string',
      verify: async (values) => ({ checks: [fail('gpu.report', `not a report: ${String(values['gpu-report'])}`)], measured: { gpus: 1 } }),
    };
    const r = await sigil(['--gpu-report', 'x.hex', '--json'], [gpu]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({
      verified: false,
      measured: { gpu: { gpus: 1 } },
      checks: [{ name: 'gpu.report', ok: false, detail: 'not a report: x.hex' }],
    });
    expect((await sigil(['--help'], [gpu])).stdout).toMatch(/^ {2}--gpu-report <FILE> +a GPU report$/m);
  });
});
