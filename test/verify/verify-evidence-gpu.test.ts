import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EvidenceExtension } from '../../src/cli/evidence-extension.ts';
import { gpuEvidenceExtension } from '../../src/cli/verify-evidence-gpu.ts';
import type { EvidenceReport } from '../../src/cli/verify-evidence.ts';
import { DEFAULT_GPU_TRUST_ROOTS } from '../../src/verify/gpu/index.ts';
import {
  createRimTestChain,
  NVIDIA_VECTORS,
  nvidiaVector,
  realChainPem,
  realReport,
  rimMatchingReport,
  rimText,
  signRim,
  VECTOR_NONCE,
  VECTOR_TIME,
  type RimTestChain,
} from '../support/gpu-fixtures.ts';
import { runVerifyEvidence } from '../support/cli.ts';

const work = mkdtempSync(join(tmpdir(), 'sigil-verify-evidence-gpu-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const file = (name: string, content: string | Uint8Array) => {
  writeFileSync(join(work, name), content);
  return join(work, name);
};

const reportHex = join(NVIDIA_VECTORS, 'hopper-attestation-report.hex');
const certs = join(NVIDIA_VECTORS, 'hopper-cert-chain.pem');
const OTHER_NONCE = 'ab'.repeat(32);

const sigil = (argv: string[], extensions?: EvidenceExtension[]) => runVerifyEvidence(argv, VECTOR_TIME, extensions);

const ALL_PASS = {
  'gpu[0].report': 'PASS',
  'gpu[0].certificates': 'PASS',
  'gpu[0].signature': 'PASS',
  'gpu[0].chain': 'PASS',
  'gpu[0].root': 'PASS',
  'gpu[0].fwid': 'PASS',
  'gpu[0].nonce': 'PASS',
  'gpu[0].measurements': 'WAIVED',
  'gpu[0].revocation': 'WAIVED',
};
/** The same run without --allow-unpinned-code: the values nobody pinned print as ----. */
const ALL_STRICT = { ...ALL_PASS, 'gpu[0].measurements': '----', 'gpu[0].revocation': '----' };
const UNPINNED_WAIVER = '(waived: --allow-unpinned-code: values nobody pinned are accepted)';

describe('sigil verify-evidence --gpu-report on the real H100 report (nvtrust sample)', () => {
  it('passes the signature, chain, FWID and nonce, shows the measured values, and marks RIMs and OCSP as not checked', async () => {
    // Values compared with nothing keep the verdict at NOT VERIFIED until pinned or waived.
    const strict = await sigil(['--gpu-report', reportHex, '--gpu-certs', certs, '--nonce', VECTOR_NONCE]);
    expect(strict.code).toBe(1);
    expect(strict.marks).toMatchObject({ 'gpu[0].measurements': '----', 'gpu[0].revocation': '----' });
    expect(strict.stdout).toContain(
      '---- gpu[0].revocation — NOT PINNED: not checked: no recorded OCSP responses were given for the device certificate chain (reference values gpu.ocsp), so a revoked certificate would go unnoticed\n',
    );
    expect(strict.stdout.trimEnd().split('\n').at(-1)).toBe(
      'NOT VERIFIED: 7 checks passed; 2 not pinned, so compared with nothing (gpu[0].measurements, gpu[0].revocation)',
    );
    const r = await sigil(['--gpu-report', reportHex, '--gpu-certs', certs, '--nonce', VECTOR_NONCE, '--allow-unpinned-code']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.marks).toEqual(ALL_PASS);
    expect(r.stdout).toContain('  gpu.driver_version 550.90.07\n  gpu.vbios_version 96.00.9F.00.01\n');
    expect(r.stdout).toContain('  gpu.fwid f5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5cdfdb3055ee051762b1f75d\n');
    expect(r.stdout).toContain(
      `WAIVED gpu[0].revocation — not checked: no recorded OCSP responses were given for the device certificate chain (reference values gpu.ocsp), so a revoked certificate would go unnoticed ${UNPINNED_WAIVER}\n`,
    );
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe('verified with waivers: 7 checks passed; 2 waived (gpu[0].measurements, gpu[0].revocation)');
  });

  it('gives the GPU measured values as JSON: versions, SKUs, FWID, nonce and all 64 measurements', async () => {
    const r = await sigil(['--gpu-report', reportHex, '--gpu-certs', certs, '--nonce', VECTOR_NONCE.toUpperCase(), '--json', '--allow-unpinned-code']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as EvidenceReport;
    expect(report.verified).toBe(true);
    expect(report.tee).toBeUndefined();
    const gpu = report.measured.gpu as Record<string, unknown> & { measurements: Record<string, string> };
    expect(gpu).toMatchObject({
      driver_version: '550.90.07',
      vbios_version: '96.00.9F.00.01',
      project: '1010',
      project_sku: '0200',
      chip_sku: '882',
      fwid: 'f5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5cdfdb3055ee051762b1f75d',
      nonce: VECTOR_NONCE,
    });
    expect(Object.keys(gpu.measurements)).toHaveLength(64);
    expect(gpu.measurements['1']!.slice(0, 16)).toBe('8048dfd18fe229bf');
  });

  it('reads the report as raw bytes and as base64 text alike', async () => {
    for (const path of [
      file('report.bin', realReport()),
      file(
        'report.b64',
        realReport()
          .toString('base64')
          .replace(/(.{76})/g, '$1\n'),
      ),
    ]) {
      const r = await sigil(['--gpu-report', path, '--gpu-certs', certs, '--nonce', VECTOR_NONCE, '--allow-unpinned-code']);
      expect([path, r.code, r.marks]).toEqual([path, 0, ALL_PASS]);
    }
  });

  it('fails the nonce when none is given, and when another one is expected', async () => {
    const none = await sigil(['--gpu-report', reportHex, '--gpu-certs', certs]);
    expect(none.code).toBe(1);
    expect(Object.entries(none.marks).filter(([, m]) => m === 'FAIL')).toEqual([['gpu[0].nonce', 'FAIL']]);
    expect(none.stdout).toContain('FAIL gpu[0].nonce — not checked: no expected nonce given');
    const other = await sigil(['--gpu-report', reportHex, '--gpu-certs', certs, '--nonce', OTHER_NONCE]);
    expect(other.code).toBe(1);
    expect(Object.entries(other.marks).filter(([, m]) => m === 'FAIL')).toEqual([['gpu[0].nonce', 'FAIL']]);
    expect(other.stdout).toContain(`FAIL gpu[0].nonce — the signed request carries nonce ${VECTOR_NONCE}, not yours (${OTHER_NONCE})`);
  });

  it('fails the signature of a report with one measurement byte changed', async () => {
    const tampered = realReport();
    tampered[52] = tampered[52]! ^ 0x01; // the first byte of measurement 1 (37-byte request, 8-byte header, 7-byte block header)
    const r = await sigil(['--gpu-report', file('tampered.hex', tampered.toString('hex')), '--gpu-certs', certs, '--nonce', VECTOR_NONCE]);
    expect(r.code).toBe(1);
    expect(r.marks).toEqual({ ...ALL_STRICT, 'gpu[0].signature': 'FAIL' });
  });

  it('fails a report that cannot be read, without further checks', async () => {
    const r = await sigil([
      '--gpu-report',
      file('short.hex', realReport().subarray(0, 4000).toString('hex')),
      '--gpu-certs',
      certs,
      '--nonce',
      VECTOR_NONCE,
      '--json',
    ]);
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as EvidenceReport;
    expect(report.checks.map((c) => [c.name, c.ok])).toEqual([['gpu[0].report', false]]);
    expect(report.measured.gpu).toBeUndefined();
  });

  it('fails the root for a chain that ends at a root not trusted, and the signature for a chain of another device', async () => {
    const foreign = await sigil(
      ['--gpu-report', reportHex, '--gpu-certs', certs, '--nonce', VECTOR_NONCE],
      [gpuEvidenceExtension({ deviceIdentity: [nvidiaVector('nvidia-rim-root.pem').toString('utf8')], rim: [] })],
    );
    expect(foreign.code).toBe(1);
    expect(foreign.marks).toEqual({ ...ALL_STRICT, 'gpu[0].root': 'FAIL' });
    expect(foreign.stdout).toContain('FAIL gpu[0].root — the chain ends at NVIDIA Device Identity CA, which is not a trusted NVIDIA device root');
    const pems = realChainPem().match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----\n?/g)!;
    const withoutLeaf = await sigil(['--gpu-report', reportHex, '--gpu-certs', file('no-leaf.pem', pems.slice(1).join('')), '--nonce', VECTOR_NONCE]);
    expect(withoutLeaf.code).toBe(1);
    expect(withoutLeaf.marks['gpu[0].signature']).toBe('FAIL');
    expect(withoutLeaf.marks['gpu[0].fwid']).toBe('FAIL');
  });
});

describe('sigil verify-evidence --gpu-report with RIMs from --reference (gpu.rims)', () => {
  let chain: RimTestChain;
  let extension: EvidenceExtension;
  beforeAll(async () => {
    chain = await createRimTestChain();
    extension = gpuEvidenceExtension({ deviceIdentity: DEFAULT_GPU_TRUST_ROOTS.deviceIdentity, rim: [chain.rootPem] });
  });
  const reference = (name: string, driverRim: string, vbiosRim: string) =>
    file(`${name}.yaml`, `gpu:\n  rims:\n    - ${file(`${name}-driver.swidtag`, driverRim)}\n    - ${file(`${name}-vbios.swidtag`, vbiosRim)}\n`);

  it("fails NVIDIA's real sample RIMs, which describe other versions than the report's", async () => {
    const ref = reference('nvidia-samples', rimText('driver-rim-test.swidtag'), rimText('vbios-rim-test.swidtag'));
    const r = await sigil(['--gpu-report', reportHex, '--gpu-certs', certs, '--nonce', VECTOR_NONCE, '--reference', ref]);
    expect(r.code).toBe(1);
    expect(r.marks).toMatchObject({
      'gpu.rim[0].signature': 'PASS',
      'gpu.rim[0].chain': 'PASS',
      'gpu.rim[1].signature': 'PASS',
      'gpu.rim[1].chain': 'PASS',
      'gpu[0].driver_rim': 'FAIL',
      'gpu[0].vbios_rim': 'FAIL',
      'gpu[0].measurements': 'FAIL',
    });
    expect(r.stdout).toContain('FAIL gpu[0].driver_rim — no verified RIM describes driver 550.90.07 (verified driver RIMs: 545.00)');
  });

  it("passes RIMs that pin the report's measurements, and fails one measurement pinned differently", async () => {
    const driver = (change?: (i: number, v: string) => string) => signRim(rimMatchingReport(rimText('driver-rim-test.swidtag'), '550.90.07', change), chain);
    const vbios = signRim(rimMatchingReport(rimText('vbios-rim-test.swidtag'), '96.00.9F.00.01'), chain);
    // No recorded OCSP responses are given: the revocation check stays open, so it is waived here by name.
    const good = await sigil(
      ['--gpu-report', reportHex, '--gpu-certs', certs, '--nonce', VECTOR_NONCE, '--reference', reference('match', driver(), vbios), '--allow-unpinned-code'],
      [extension],
    );
    expect(good.code).toBe(0);
    expect(good.marks).toMatchObject({ 'gpu[0].driver_rim': 'PASS', 'gpu[0].vbios_rim': 'PASS', 'gpu[0].measurements': 'PASS', 'gpu[0].revocation': 'WAIVED' });
    expect(good.stdout).toContain('PASS gpu[0].measurements — all 33 measurements the RIMs pin equal one of their signed values');
    const bad = await sigil(
      [
        '--gpu-report',
        reportHex,
        '--gpu-certs',
        certs,
        '--nonce',
        VECTOR_NONCE,
        '--reference',
        reference(
          'mismatch',
          driver((i, v) => (i === 33 ? `${v.slice(0, -2)}00` : v)),
          vbios,
        ),
      ],
      [extension],
    );
    expect(bad.code).toBe(1);
    expect(Object.entries(bad.marks).filter(([, m]) => m === 'FAIL')).toEqual([['gpu[0].measurements', 'FAIL']]);
  });

  it('ends with exit status 3 when a RIM the reference names cannot be read', async () => {
    const ref = file('missing-rim.yaml', `gpu:\n  rims:\n    - ${join(work, 'nowhere.swidtag')}\n`);
    const r = await sigil(['--gpu-report', reportHex, '--gpu-certs', certs, '--nonce', VECTOR_NONCE, '--reference', ref]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('cannot read RIM');
  });
});

describe('sigil verify-evidence GPU usage', () => {
  it.each([
    [['--gpu-report', reportHex], '--gpu-report needs --gpu-certs'],
    [['--gpu-certs', certs], '--gpu-certs and --nonce go with --gpu-report'],
    [['--nonce', VECTOR_NONCE], '--gpu-certs and --nonce go with --gpu-report'],
    [['--gpu-report', reportHex, '--gpu-certs', certs, '--nonce', 'abc'], '--nonce is 32 bytes of hex (64 digits)'],
  ])('refuses %j with exit status 2', async (argv, message) => {
    const r = await sigil(argv);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
  });

  it('ends with exit status 3 when the report file cannot be read', async () => {
    const r = await sigil(['--gpu-report', join(work, 'absent.hex'), '--gpu-certs', certs, '--nonce', VECTOR_NONCE]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('cannot read GPU report');
  });
});
