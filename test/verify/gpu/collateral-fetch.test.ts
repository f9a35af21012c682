/**
 * fetchNvidiaCollateral against a loopback stand-in for NVIDIA's RIM service (replaying NVIDIA's real RIMs in the
 * service's JSON answer) and OCSP responder (answering RFC 6960 requests with responses signed by a test CA).
 */
import { createHash, KeyObject, webcrypto, X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { AsnConvert } from '@peculiar/asn1-schema';
import { OCSPRequest } from '@peculiar/asn1-ocsp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchNvidiaCollateral, rimIdsForReport } from '../../../src/verify/gpu/collateral-fetch.ts';
import { readOcspBundle, revocationCheck } from '../../../src/verify/gpu/ocsp.ts';
import { verifyRim } from '../../../src/verify/gpu/rim.ts';
import { readSpdmMeasurementReport } from '../../../src/verify/gpu/spdm-measurements.ts';
import { NVIDIA_RIM_ROOT } from '../../../src/verify/gpu/roots/nvidia-rim-root.ts';
import { realReport, rimText, VECTOR_TIME } from '../../support/gpu-fixtures.ts';
import { AT, ocspResponse } from '../../support/ocsp-fixtures.ts';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const P384: EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-384' };
const SIGN = { name: 'ECDSA', hash: 'SHA-384' } as EcdsaParams;
const RIMS: Record<string, string> = {
  NV_GPU_DRIVER_GH100_545_00: rimText('driver-rim-test.swidtag'),
  NV_GPU_VBIOS_1010_0200_882_96005E0001: rimText('vbios-rim-prod-96005E0001.swidtag'),
};

let server: Server;
let base: string;
let chain: X509Certificate[];
const ocspRequests: string[] = [];

beforeAll(async () => {
  const common = { notBefore: new Date('2025-01-01T00:00:00Z'), notAfter: new Date('2040-01-01T00:00:00Z'), signingAlgorithm: SIGN };
  const rootKeys = (await webcrypto.subtle.generateKey(P384, true, ['sign', 'verify'])) as CryptoKeyPair;
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    ...common,
    serialNumber: '01',
    name: 'CN=Test Device Root',
    keys: rootKeys,
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
  });
  const leafKeys = (await webcrypto.subtle.generateKey(P384, true, ['sign', 'verify'])) as CryptoKeyPair;
  const leaf = await x509.X509CertificateGenerator.create({
    ...common,
    serialNumber: '4242',
    subject: 'CN=Test GPU',
    issuer: root.subject,
    publicKey: leafKeys.publicKey,
    signingKey: rootKeys.privateKey,
  });
  chain = [leaf, root].map((c) => new X509Certificate(Buffer.from(c.rawData)));
  const rootKey = KeyObject.from(rootKeys.privateKey);
  server = createServer((req, res) => {
    const rim = /^\/v1\/rim\/([^/]+)$/.exec(req.url ?? '');
    if (req.method === 'GET' && rim !== null) {
      const xml = RIMS[decodeURIComponent(rim[1]!)];
      if (xml === undefined) return void res.writeHead(404).end();
      const bytes = Buffer.from(xml, 'utf8');
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ id: decodeURIComponent(rim[1]!), rim: bytes.toString('base64'), sha256: createHash('sha256').update(bytes).digest('hex') }));
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/ocsp' || req.headers['content-type'] !== 'application/ocsp-request') return void res.writeHead(400).end();
      const asked = AsnConvert.parse(Buffer.concat(chunks), OCSPRequest).tbsRequest.requestList[0]!.reqCert;
      ocspRequests.push(asked.hashAlgorithm.algorithm);
      const der = ocspResponse({ cert: new Uint8Array(chain[0]!.raw), issuer: new Uint8Array(chain[1]!.raw), signer: rootKey });
      res.writeHead(200, { 'content-type': 'application/ocsp-response' }).end(Buffer.from(der));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
});

describe('fetchNvidiaCollateral', () => {
  it("names the RIMs of a real H100 report as NVIDIA's RIM service does", () => {
    expect(rimIdsForReport(readSpdmMeasurementReport(realReport()))).toEqual(['NV_GPU_DRIVER_GH100_550.90.07', 'NV_GPU_VBIOS_1010_0200_882_96009F0001']);
  });

  it('fetches real RIMs by id and OCSP answers for a chain, from configurable URLs, in the form the verifier reads', async () => {
    const collateral = await fetchNvidiaCollateral({ rimIds: Object.keys(RIMS), chains: [chain] }, { rimServiceUrl: `${base}/`, ocspUrl: `${base}/ocsp` });
    expect(collateral.rims.map((r) => r.id)).toEqual(Object.keys(RIMS));
    for (const { text } of collateral.rims) {
      const { checks } = verifyRim(text, { name: 'rim', roots: [NVIDIA_RIM_ROOT], at: VECTOR_TIME });
      expect(checks.filter((c) => c.name !== 'rim.revocation').map((c) => [c.name, c.ok])).toEqual([
        ['rim.signature', true],
        ['rim.schema', true],
        ['rim.chain', true],
      ]);
    }
    expect(ocspRequests).toEqual(['2.16.840.1.101.3.4.2.2']);
    expect(collateral.ocsp.map((o) => o.label)).toEqual(['CN=Test GPU serial 4242']);
    const check = revocationCheck('gpu[0].revocation', 'device certificate chain', chain, { bundle: readOcspBundle(collateral.ocsp), at: AT });
    expect(check.ok).toBe(true);
    expect(check.detail).toContain('Test GPU: good from');
  });

  it('rejects naming the RIM the service does not have, and an OCSP answer that is not one', async () => {
    await expect(fetchNvidiaCollateral({ rimIds: ['NV_GPU_DRIVER_GH100_999.99'], chains: [] }, { rimServiceUrl: base })).rejects.toThrow(
      `RIM NV_GPU_DRIVER_GH100_999.99: ${base}/v1/rim/NV_GPU_DRIVER_GH100_999.99 answered HTTP 404`,
    );
    await expect(fetchNvidiaCollateral({ rimIds: [], chains: [chain] }, { ocspUrl: `${base}/v1/rim/NV_GPU_DRIVER_GH100_545_00` })).rejects.toThrow(
      'answered HTTP 400',
    );
  });
});
