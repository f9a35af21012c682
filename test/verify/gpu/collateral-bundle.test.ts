/**
 * `sigil collateral fetch --gpu-report` against a loopback stand-in for NVIDIA's RIM service and OCSP responder that
 * replays real recorded answers (google/go-nvattest-tools' test data, test/vectors/README.md): NVIDIA's driver and
 * VBIOS RIMs for the real H100 report's firmware, and NVIDIA's own OCSP answers for that GPU's device chain and for
 * the RIM signing chains, every signature intact. Then `sigil verify-evidence` reads the bundle it wrote.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AsnConvert } from '@peculiar/asn1-schema';
import { BasicOCSPResponse, OCSPRequest, OCSPResponse } from '@peculiar/asn1-ocsp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collateralCommand } from '../../../src/cli/collateral.ts';
import { NVIDIA_VECTORS, VECTOR_NONCE } from '../../support/gpu-fixtures.ts';
import { runVerifyEvidence } from '../../support/cli.ts';

const RECORDED = join(NVIDIA_VECTORS, 'go-nvattest-tools');
const DRIVER_ID = 'NV_GPU_DRIVER_GH100_550.90.07';
const VBIOS_ID = 'NV_GPU_VBIOS_1010_0200_882_96009F0001';
const rimXml = (id: string) => readFileSync(join(RECORDED, `${id}.xml`), 'utf8');
/** NVIDIA answered for the device chain on 21 August 2025 and for the RIM signing chains on 24 October 2025, each for a day. */
const DEVICE_ANSWERS_CURRENT = new Date('2025-08-21T12:00:00Z');
const RIM_ANSWERS_CURRENT = new Date('2025-10-24T12:00:00Z');

const serialOf = (der: Uint8Array) => {
  const basic = AsnConvert.parse(AsnConvert.parse(der, OCSPResponse).responseBytes!.response.buffer, BasicOCSPResponse);
  return Buffer.from(basic.tbsResponseData.responses[0]!.certID.serialNumber).toString('hex').replace(/^00/, '');
};
/** NVIDIA's recorded answers by the serial they are about. */
const answers = new Map(
  readdirSync(RECORDED)
    .filter((f) => f.endsWith('_ocsp_response.dat'))
    .map((f) => {
      const der = new Uint8Array(Buffer.from(readFileSync(join(RECORDED, f), 'utf8'), 'base64'));
      return [serialOf(der), der] as const;
    }),
);

/** The driver RIM with one measurement value changed and its signature kept: what a tampering mirror would serve. */
function tamperedDriverRim(): string {
  const xml = rimXml(DRIVER_ID);
  const m = /ns\d*:Hash0="([0-9a-f])/.exec(xml)!;
  const at = m.index + m[0].length - 1;
  return xml.slice(0, at) + (m[1] === '0' ? '1' : '0') + xml.slice(at + 1);
}

let server: Server;
let base = '';
const asked: string[] = [];
const work = mkdtempSync(join(tmpdir(), 'sigil-nvidia-collateral-'));

beforeAll(async () => {
  server = createServer((req, res) => {
    const rim = /^\/(tampered\/)?v1\/rim\/([^/]+)$/.exec(req.url ?? '');
    if (req.method === 'GET' && rim !== null) {
      const id = decodeURIComponent(rim[2]!);
      if (id !== DRIVER_ID && id !== VBIOS_ID) return void res.writeHead(404).end();
      const bytes = Buffer.from(rim[1] !== undefined && id === DRIVER_ID ? tamperedDriverRim() : rimXml(id), 'utf8');
      const body = { id, rim: bytes.toString('base64'), sha256: createHash('sha256').update(bytes).digest('hex') };
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/ocsp') return void res.writeHead(400).end();
      const serial = Buffer.from(AsnConvert.parse(Buffer.concat(chunks), OCSPRequest).tbsRequest.requestList[0]!.reqCert.serialNumber)
        .toString('hex')
        .replace(/^00/, '');
      asked.push(serial);
      const der = answers.get(serial);
      if (der === undefined) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/ocsp-response' }).end(Buffer.from(der));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
  rmSync(work, { recursive: true, force: true });
});

async function fetchInto(out: string, rimService = base) {
  let stdout = '';
  let stderr = '';
  const gpu = ['--gpu-report', join(NVIDIA_VECTORS, 'hopper-attestation-report.hex'), '--gpu-certs', join(NVIDIA_VECTORS, 'hopper-cert-chain.pem')];
  const code = await collateralCommand(['fetch', ...gpu, '--out', out, '--nvidia-rim-service', rimService, '--nvidia-ocsp', `${base}/ocsp`], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
  });
  return { code, stdout, stderr };
}

const verifyAt = (dir: string, at: Date) =>
  runVerifyEvidence(
    [
      '--gpu-report',
      join(NVIDIA_VECTORS, 'hopper-attestation-report.hex'),
      '--gpu-certs',
      join(NVIDIA_VECTORS, 'hopper-cert-chain.pem'),
      '--nonce',
      VECTOR_NONCE,
      '--collateral',
      dir,
      '--at',
      at.toISOString(),
    ],
    at,
  );

describe('sigil collateral fetch for a real H100 report, then sigil verify-evidence with the bundle', () => {
  const dir = join(work, 'bundle');

  it("fetches the RIMs the report's firmware names and one OCSP answer per NVIDIA certificate, not the GPU's own", async () => {
    asked.length = 0;
    const r = await fetchInto(dir);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(
      r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ')[0]),
    ).toEqual([
      `nvidia-rim-${DRIVER_ID}.json`,
      `nvidia-rim-${VBIOS_ID}.json`,
      ...[1, 2, 3, 4, 5, 6, 7].map((n) => `nvidia-ocsp-0${n}.der`),
      'nvidia-collateral.json',
    ]);
    expect(r.stdout).toContain(`nvidia-rim-${DRIVER_ID}.json (`);
    expect(r.stdout).toContain(`bytes) from ${base}/v1/rim/${DRIVER_ID}\n`);
    // Three device CAs (not the GPU's firmware-issued certificate 53C22B...), three driver RIM signers, the VBIOS RIM's own signer.
    expect(asked.length).toBe(7);
    expect(new Set(asked)).toEqual(new Set(answers.keys()));
    expect(asked).not.toContain('53c22ba15e5d68088282da074ed9fb37aa585771');
    const manifest = JSON.parse(readFileSync(join(dir, 'nvidia-collateral.json'), 'utf8')) as { rims: Array<{ id: string }>; ocsp: Array<{ about: string }> };
    expect(manifest.rims.map((x) => x.id)).toEqual([DRIVER_ID, VBIOS_ID]);
    expect(manifest.ocsp.map((x) => x.about)).toContain(
      'serialNumber=41431D480FE5E87274, C=US, O=NVIDIA Corporation, CN=GH100 A01 GSP BROM serial 41431D480FE5E87274',
    );
  });

  it("passes the device chain's revocation on NVIDIA's answers of 21 August 2025, when the RIM answers were not yet made", async () => {
    const r = await verifyAt(dir, DEVICE_ANSWERS_CURRENT);
    expect(r.marks['gpu[0].revocation']).toBe('PASS');
    expect(r.stdout).toMatch(
      /PASS gpu\[0\]\.revocation — no certificate of the device certificate chain is revoked, by NVIDIA's recorded OCSP responses: GH100 A01 GSP BROM: good from 2025-08-21T06:47:07\.000Z to 2025-08-22T06:47:07\.000Z, signed by NVIDIA OCSP Responder L3 GH100 ICA1 Identity \(delegated by NVIDIA GH100 Provisioner ICA 1\); NVIDIA GH100 Provisioner ICA 1: good .*; NVIDIA GH100 Identity: good .*signed by NVIDIA OCSP Responder L1-A 02 \(delegated by NVIDIA Device Identity CA\)\n/,
    );
    expect(r.marks).toMatchObject({
      'gpu.rim[0].signature': 'PASS',
      'gpu.rim[0].chain': 'PASS',
      'gpu.rim[0].revocation': 'FAIL',
      'gpu.rim[1].revocation': 'FAIL',
    });
    expect(r.stdout).toContain(
      'the response nvidia-ocsp-04.der about HCC RIM L4 Signer was made at 2025-10-24T11:32:21.000Z, after the verification time 2025-08-21T12:00:00.000Z',
    );
    expect(r.code).toBe(1);
  });

  it("passes NVIDIA's real RIMs, their revocation, the RIM choice and every measurement on 24 October 2025, when the device answers had expired", async () => {
    const r = await verifyAt(dir, RIM_ANSWERS_CURRENT);
    expect(r.marks).toEqual({
      'gpu.rim[0].signature': 'PASS',
      'gpu.rim[0].schema': 'PASS',
      'gpu.rim[0].chain': 'PASS',
      'gpu.rim[0].revocation': 'PASS',
      'gpu.rim[1].signature': 'PASS',
      'gpu.rim[1].schema': 'PASS',
      'gpu.rim[1].chain': 'PASS',
      'gpu.rim[1].revocation': 'PASS',
      'gpu[0].report': 'PASS',
      'gpu[0].certificates': 'PASS',
      'gpu[0].signature': 'PASS',
      'gpu[0].chain': 'PASS',
      'gpu[0].root': 'PASS',
      'gpu[0].fwid': 'PASS',
      'gpu[0].nonce': 'PASS',
      'gpu[0].driver_rim': 'PASS',
      'gpu[0].vbios_rim': 'PASS',
      'gpu[0].vbios_board': 'PASS',
      'gpu[0].measurements': 'PASS',
      'gpu[0].revocation': 'FAIL',
    });
    expect(r.stdout).toContain(
      'PASS gpu[0].vbios_board — the VBIOS RIM NV_GPU_VBIOS_1010_0200_882_96009F0001 is for project 1010, project SKU 0200, chip SKU 882: this board',
    );
    expect(r.stdout).toContain(
      'the response nvidia-ocsp-01.der about GH100 A01 GSP BROM expired at 2025-08-22T06:47:07.000Z (verification time 2025-10-24T12:00:00.000Z)',
    );
    expect(r.code).toBe(1);
  });

  it('refuses evidence whose driver version would name a file outside the bundle, and a report without its chain', async () => {
    const report = Buffer.from(readFileSync(join(NVIDIA_VECTORS, 'hopper-attestation-report.hex'), 'utf8').trim(), 'hex');
    const at = report.indexOf('550.90.07');
    report.write('../../x.a', at, 'latin1');
    const hostile = join(work, 'hostile-report.bin');
    writeFileSync(hostile, report);
    let stderr = '';
    const io = { stdout: { write: () => true }, stderr: { write: (t: string) => (stderr += t) } };
    const args = ['--gpu-certs', join(NVIDIA_VECTORS, 'hopper-cert-chain.pem'), '--out', join(work, 'hostile'), '--nvidia-rim-service', base];
    expect(await collateralCommand(['fetch', '--gpu-report', hostile, ...args], io)).toBe(3);
    expect(stderr).toBe(`sigil collateral fetch: the GPU report's firmware names the RIM "NV_GPU_DRIVER_GH100_../../x.a", which is not a RIM id\n`);
    expect(existsSync(join(work, 'hostile'))).toBe(false);
    stderr = '';
    expect(await collateralCommand(['fetch', '--gpu-report', hostile, '--out', join(work, 'hostile')], io)).toBe(2);
    expect(stderr).toMatch(/^sigil collateral: --gpu-report and --gpu-certs go together\n/);
  });

  it('does not read a bundle whose manifest names a path outside it, or a file it lacks', async () => {
    const bad = join(work, 'bad-manifest');
    mkdirSync(bad);
    const manifest = (file: string) =>
      writeFileSync(join(bad, 'nvidia-collateral.json'), JSON.stringify({ rims: [{ id: DRIVER_ID, file, url: base }], ocsp: [] }));
    manifest('../bundle/nvidia-rim-NV_GPU_DRIVER_GH100_550.90.07.json');
    const outside = await verifyAt(bad, RIM_ANSWERS_CURRENT);
    expect(outside.code).toBe(3);
    expect(outside.stderr).toBe(
      `sigil verify-evidence: could not verify: cannot read the collateral bundle ${bad}: nvidia-collateral.json names "../bundle/nvidia-rim-NV_GPU_DRIVER_GH100_550.90.07.json", not a file name inside the bundle\n`,
    );
    manifest('nvidia-rim-absent.json');
    const absent = await verifyAt(bad, RIM_ANSWERS_CURRENT);
    expect(absent.code).toBe(3);
    expect(absent.stderr).toContain('nvidia-collateral.json names nvidia-rim-absent.json, which cannot be read (ENOENT)');
  });

  it('fails a RIM a mirror changed under gpu.rim[0].signature, and then has no driver RIM to compare with', async () => {
    const tampered = join(work, 'tampered');
    const fetched = await fetchInto(tampered, `${base}/tampered`);
    expect(fetched.code).toBe(0);
    const r = await verifyAt(tampered, RIM_ANSWERS_CURRENT);
    expect(r.marks).toMatchObject({
      'gpu.rim[0].signature': 'FAIL',
      'gpu.rim[1].signature': 'PASS',
      'gpu[0].driver_rim': 'FAIL',
      'gpu[0].vbios_rim': 'PASS',
      'gpu[0].measurements': 'FAIL',
    });
    expect(r.stdout).toContain('FAIL gpu[0].driver_rim — no verified RIM describes driver 550.90.07 (verified driver RIMs: none)');
    expect(r.code).toBe(1);
  });
});
