import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collateralCommand } from '../../../src/cli/collateral.ts';
import { ARK_GENOA, ASK_GENOA } from '../../../src/verify/evidence/roots/amd-genoa.ts';
import { ARK_MILAN, ASVK_MILAN } from '../../../src/verify/evidence/roots/amd-milan.ts';
import { runVerifyEvidence } from '../../support/cli.ts';

const v = (path: string) => new URL(`../../vectors/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-collateral-fetch-'));

/**
 * Intel PCS and AMD KDS replayed on loopback, from real recorded answers: Intel's collateral for dcap-qvl's quote (as
 * dcap-qvl recorded it: the signed bodies, their issuer chains, the CRLs) and, for Azure's Genoa report, its VCEK,
 * AMD's Genoa cert_chain (the built-in ASK and ARK, copies of what KDS serves) and AMD's Genoa CRL. Every signature is intact.
 */
const dcap = JSON.parse(readFileSync(v('tdx/dcap-qvl-collateral.json'), 'utf8')) as Record<string, string>;
const vcekDer = new Uint8Array(new x509.X509Certificate(readFileSync(v('snp/openpcc-genoa-vcek.pem'), 'utf8')).rawData);
const genoaCrlDer = new Uint8Array(new x509.X509Crl(readFileSync(v('snp/openpcc-amd-genoa-crl.pem'), 'utf8')).rawData);
const AZURE_CHIP_ID = 'c70912d8d216bd3f403e97bda2d476924b962752119263a3c8dba9fc40badfc99038d2352aae22520a9003b4262e1cc3136d035b42e4b022b4196f95981a45c6';

const ROUTES: Record<string, { body: Uint8Array | string; headers?: Record<string, string> }> = {
  '/tdx/certification/v4/tcb?fmspc=B0C06F000000': {
    body: `{"tcbInfo":${dcap.tcb_info},"signature":"${dcap.tcb_info_signature}"}`,
    headers: { 'TCB-Info-Issuer-Chain': encodeURIComponent(dcap.tcb_info_issuer_chain!) },
  },
  '/tdx/certification/v4/qe/identity': {
    body: `{"enclaveIdentity":${dcap.qe_identity},"signature":"${dcap.qe_identity_signature}"}`,
    headers: { 'SGX-Enclave-Identity-Issuer-Chain': encodeURIComponent(dcap.tcb_info_issuer_chain!) },
  },
  '/sgx/certification/v4/pckcrl?ca=platform&encoding=der': {
    body: Buffer.from(dcap.pck_crl!, 'hex'),
    headers: { 'SGX-PCK-CRL-Issuer-Chain': encodeURIComponent(dcap.pck_crl_issuer_chain!) },
  },
  '/IntelSGXRootCA.der': { body: Buffer.from(dcap.root_ca_crl!, 'hex') },
  [`/vcek/v1/Genoa/${AZURE_CHIP_ID}?blSPL=10&teeSPL=0&snpSPL=23&ucodeSPL=84`]: { body: vcekDer },
  '/vcek/v1/Genoa/cert_chain': { body: `${ASK_GENOA.trim()}\n${ARK_GENOA.trim()}\n` },
  '/vcek/v1/Genoa/crl': { body: genoaCrlDer },
};

let server: Server;
let base = '';
const requested: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    requested.push(req.url ?? '');
    const route = ROUTES[req.url ?? ''];
    if (route === undefined) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, route.headers ?? {}).end(route.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(work, { recursive: true, force: true });
});

async function sigilCollateral(argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await collateralCommand(argv, { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) } });
  return { code, stdout, stderr };
}
const sources = () => ['--intel-pcs', base, '--intel-root-crl', `${base}/IntelSGXRootCA.der`, '--amd-kds', base];

describe('sigil collateral fetch', () => {
  it("fetches Intel PCS collateral for a real TDX quote, and the bundle verifies the quote's platform", async () => {
    const out = join(work, 'tdx');
    requested.length = 0;
    const r = await sigilCollateral(['fetch', '--tdx-quote', v('tdx/dcap-qvl-quote.bin'), '--out', out, ...sources()]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(requested).toEqual([
      '/tdx/certification/v4/tcb?fmspc=B0C06F000000',
      '/tdx/certification/v4/qe/identity',
      '/sgx/certification/v4/pckcrl?ca=platform&encoding=der',
      '/IntelSGXRootCA.der',
    ]);
    expect(readdirSync(out).sort()).toEqual([
      'pck-crl-issuer-chain.pem',
      'pck-crl.der',
      'qeidentity.json',
      'root-crl.der',
      'tcb-signing-chain.pem',
      'tcbinfo.json',
    ]);
    expect(r.stdout).toContain(
      `tcbinfo.json (${Buffer.byteLength(ROUTES['/tdx/certification/v4/tcb?fmspc=B0C06F000000']!.body)} bytes) from ${base}/tdx/certification/v4/tcb?fmspc=B0C06F000000\n`,
    );
    const verified = await runVerifyEvidence(['--tdx-quote', v('tdx/dcap-qvl-quote.bin'), '--collateral', out], new Date('2025-06-25T00:00:00Z'));
    expect(verified.marks).toMatchObject({
      'collateral.root_crl': 'PASS',
      'collateral.tcb_signing_chain': 'PASS',
      'collateral.tcb_info': 'PASS',
      'tdx.module_identity': 'PASS',
      'collateral.qe_identity': 'PASS',
      'collateral.pck_crl': 'PASS',
      'tdx.tcb_status': 'PASS',
    });
  });

  it('fetches the VCEK, cert_chain and CRL from AMD KDS for a real Genoa report, and the bundle verifies it', async () => {
    const out = join(work, 'snp');
    requested.length = 0;
    const r = await sigilCollateral(['fetch', '--snp-report', v('snp/openpcc-azure-genoa-report.bin'), '--out', out, ...sources()]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(requested).toEqual([`/vcek/v1/Genoa/${AZURE_CHIP_ID}?blSPL=10&teeSPL=0&snpSPL=23&ucodeSPL=84`, '/vcek/v1/Genoa/cert_chain', '/vcek/v1/Genoa/crl']);
    expect(readdirSync(out).sort()).toEqual(['amd-cert-chain.pem', 'amd-crl.der', 'amd-vcek.der']);
    // No --vcek or --ask: the report's signer and chain come from the bundle alone.
    const verified = await runVerifyEvidence(['--snp-report', v('snp/openpcc-azure-genoa-report.bin'), '--collateral', out], new Date('2025-07-01T00:00:00Z'));
    expect(verified.marks).toMatchObject({
      'snp.cert_table': 'PASS',
      'snp.report_signature': 'PASS',
      'snp.vcek_chain': 'PASS',
      'snp.root': 'PASS',
      'snp.crl': 'PASS',
      'snp.vcek_hwid': 'PASS',
      'snp.vcek_tcb': 'PASS',
    });
    expect(verified.stdout).toContain('PASS snp.vcek_chain — SEV-VCEK <- SEV-Genoa (the certificate table) <- ARK-Genoa (the built-in AMD roots, self-signed)');
  });

  it("for a real Milan VLEK report asks KDS's vlek paths and no VCEK (no VLEK CRL is recorded: the replay has none, so it exits 3 naming it and writes nothing)", async () => {
    ROUTES['/vlek/v1/Milan/cert_chain'] = { body: `${ASVK_MILAN.trim()}\n${ARK_MILAN.trim()}\n` };
    requested.length = 0;
    const out = join(work, 'vlek');
    const r = await sigilCollateral(['fetch', '--snp-report', v('snp/trustee-milan-vlek-report.bin'), '--out', out, ...sources()]);
    expect(requested).toEqual(['/vlek/v1/Milan/cert_chain', '/vlek/v1/Milan/crl']);
    expect(existsSync(out)).toBe(false);
    expect(r.stderr).toBe(`sigil collateral fetch: amd-crl.der: ${base}/vlek/v1/Milan/crl answered HTTP 404\n`);
    expect(r.code).toBe(3);
  });

  it('exits 3 naming the URL when a service answers with an error', async () => {
    const r = await sigilCollateral([
      'fetch',
      '--snp-report',
      v('snp/go-sev-guest-debug-report.bin'),
      '--amd-product',
      'Milan',
      '--out',
      join(work, 'missing'),
      ...sources(),
    ]);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(
      new RegExp(
        `^sigil collateral fetch: amd-vcek.der: ${base}/vcek/v1/Milan/[0-9a-f]{128}\\?blSPL=\\d+&teeSPL=\\d+&snpSPL=\\d+&ucodeSPL=\\d+ answered HTTP 404\\n$`,
      ),
    );
  });

  it('says why no VCEK can be fetched for a report whose CHIP_ID the host masked, and asks KDS nothing', async () => {
    const masked = Buffer.from(readFileSync(v('snp/openpcc-azure-genoa-report.bin')));
    masked.fill(0, 0x1a0, 0x1e0);
    const report = join(work, 'masked-chip.bin');
    writeFileSync(report, masked);
    requested.length = 0;
    const r = await sigilCollateral(['fetch', '--snp-report', report, '--out', join(work, 'masked'), ...sources()]);
    expect(r.stderr).toBe(
      "sigil collateral fetch: the report's CHIP_ID is all zeros (the host masked it), and AMD's KDS finds a VCEK by CHIP_ID: take the VCEK from the evidence's certificate table instead\n",
    );
    expect(r.code).toBe(3);
    expect(requested).toEqual([]);
  });

  it('exits 2 on bad usage', async () => {
    expect((await sigilCollateral(['fetch', '--out', work])).code).toBe(2);
    expect((await sigilCollateral(['fetch', '--tdx-quote', 'q', '--snp-report', 'r', '--out', work])).code).toBe(2);
    expect((await sigilCollateral(['get'])).stderr).toContain('unknown subcommand "get"');
  });
});
