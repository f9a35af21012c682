/**
 * Revocation from recorded OCSP responses. No recorded NVIDIA OCSP response was found in public test data (see
 * test/vectors/README.md), so the responses here are made and signed in the test, by a test CA, with the same
 * library family Sigil reads them with; the GPU cases use NVIDIA's real H100 chain and RIMs.
 */
import { KeyObject, webcrypto, X509Certificate } from 'node:crypto';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { beforeAll, describe, expect, it } from 'vitest';
import { readOcspBundle, revocationCheck } from '../../../src/verify/gpu/ocsp.ts';
import { verifyGpuEvidence } from '../../../src/verify/gpu/index.ts';
import { checkMark } from '../../../src/verify/check.ts';
import { gpuEntry, realChainPem, rimText, VECTOR_NONCE, VECTOR_TIME } from '../../support/gpu-fixtures.ts';
import { AT, HOUR, ocspResponse, type ResponseSpec } from '../../support/ocsp-fixtures.ts';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const P384: EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-384' };
const SHA384_SIGN = { name: 'ECDSA', hash: 'SHA-384' } as EcdsaParams;

interface Issued {
  cert: x509.X509Certificate;
  key: KeyObject;
}

async function issue(subject: string, serial: string, issuer: Issued | null, extensions: x509.Extension[] = []): Promise<Issued> {
  const keys = (await webcrypto.subtle.generateKey(P384, true, ['sign', 'verify'])) as CryptoKeyPair;
  const common = {
    serialNumber: serial,
    notBefore: new Date('2025-01-01T00:00:00Z'),
    notAfter: new Date('2040-01-01T00:00:00Z'),
    signingAlgorithm: SHA384_SIGN,
    extensions,
  };
  const cert =
    issuer === null
      ? await x509.X509CertificateGenerator.createSelfSigned({ ...common, name: subject, keys })
      : await x509.X509CertificateGenerator.create({
          ...common,
          subject,
          issuer: issuer.cert.subject,
          publicKey: keys.publicKey,
          signingKey: (issuer as Issued & { cryptoKey: CryptoKey }).cryptoKey,
        });
  return Object.assign({ cert, key: KeyObject.from(keys.privateKey) }, { cryptoKey: keys.privateKey });
}

let root: Issued;
let ca: Issued;
let leaf: Issued;
let chain: X509Certificate[];
const der = (i: Issued) => new Uint8Array(i.cert.rawData);
const bundle = (...responses: Uint8Array[]) => readOcspBundle(responses.map((r, i) => ({ label: `response ${i}`, der: r })));

beforeAll(async () => {
  const caExt = [new x509.BasicConstraintsExtension(true, undefined, true)];
  root = await issue('CN=Test Root', '01', null, caExt);
  ca = await issue('CN=Test CA', '02', root, caExt);
  leaf = await issue('CN=Test Device', '0a1b', ca);
  chain = [leaf, ca, root].map((i) => new X509Certificate(Buffer.from(i.cert.rawData)));
});

describe('revocation of a certificate chain from recorded OCSP responses', () => {
  it('passes when every certificate below the root has a good, current answer signed by its issuer', () => {
    const check = revocationCheck('x.revocation', 'test chain', chain, {
      bundle: bundle(
        ocspResponse({ cert: der(leaf), issuer: der(ca), signer: ca.key }),
        ocspResponse({ cert: der(ca), issuer: der(root), signer: root.key, hash: 'sha1' }),
      ),
      at: AT,
    });
    expect(checkMark(check)).toBe('PASS');
    expect(check.detail).toBe(
      "no certificate of the test chain is revoked, by NVIDIA's recorded OCSP responses: Test Device: good from 2029-12-31T23:00:00.000Z to 2030-01-02T00:00:00.000Z, signed by Test CA; Test CA: good from 2029-12-31T23:00:00.000Z to 2030-01-02T00:00:00.000Z, signed by Test Root",
    );
  });

  it('fails a revoked certificate, naming when', () => {
    const check = revocationCheck('x.revocation', 'test chain', chain, {
      bundle: bundle(ocspResponse({ cert: der(leaf), issuer: der(ca), signer: ca.key, status: 'revoked' })),
      at: AT,
    });
    expect(checkMark(check)).toBe('FAIL');
    expect(check.detail).toBe('the test chain cannot be trusted: Test Device was revoked at 2029-06-01T00:00:00.000Z, says Test CA (response 0)');
  });

  it('fails an answer that expired, that is not yet valid, that states no nextUpdate, or whose status is unknown', () => {
    const cases: Array<[Partial<ResponseSpec>, string]> = [
      [{ nextUpdate: new Date(AT.getTime() - 1) }, 'expired at 2029-12-31T23:59:59.999Z'],
      [{ thisUpdate: new Date(AT.getTime() + HOUR) }, 'after the verification time'],
      [{ nextUpdate: null }, 'states no nextUpdate'],
      [{ status: 'unknown' }, 'does not know Test Device'],
    ];
    for (const [change, words] of cases) {
      const check = revocationCheck('x.revocation', 'test chain', chain, {
        bundle: bundle(ocspResponse({ cert: der(leaf), issuer: der(ca), signer: ca.key, ...change })),
        at: AT,
      });
      expect(checkMark(check)).toBe('FAIL');
      expect(check.detail).toContain(words);
    }
  });

  it('fails an answer signed by anyone but the issuer or a responder the issuer certified for OCSP signing', async () => {
    const stranger = await issue('CN=Stranger', '77', null);
    const forged = revocationCheck('x.revocation', 'test chain', chain, {
      bundle: bundle(ocspResponse({ cert: der(leaf), issuer: der(ca), signer: stranger.key })),
      at: AT,
    });
    expect(checkMark(forged)).toBe('FAIL');
    expect(forged.detail).toContain('is not signed by its issuer Test CA nor by an OCSP signer it certified');
    const delegate = await issue('CN=Test OCSP Responder', '33', ca, [new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.ocspSigning])]);
    const delegated = revocationCheck('x.revocation', 'test chain', chain.slice(0, 2), {
      bundle: bundle(ocspResponse({ cert: der(leaf), issuer: der(ca), signer: delegate.key, signerCert: der(delegate) })),
      at: AT,
    });
    expect(checkMark(delegated)).toBe('PASS');
    expect(delegated.detail).toContain('signed by Test OCSP Responder (delegated by Test CA)');
    const notForOcsp = await issue('CN=Test Other Cert', '34', ca);
    const refused = revocationCheck('x.revocation', 'test chain', chain.slice(0, 2), {
      bundle: bundle(ocspResponse({ cert: der(leaf), issuer: der(ca), signer: notForOcsp.key, signerCert: der(notForOcsp) })),
      at: AT,
    });
    expect(checkMark(refused)).toBe('FAIL');
  });

  it('fails closed on a certificate no response covers, unless the auditor waived missing answers; without a bundle, not pinned', () => {
    const partial = bundle(ocspResponse({ cert: der(leaf), issuer: der(ca), signer: ca.key }), new Uint8Array([0x30, 0x03, 0x0a, 0x01, 0x01]));
    const missing = revocationCheck('x.revocation', 'test chain', chain, { bundle: partial, at: AT });
    expect(checkMark(missing)).toBe('FAIL');
    expect(missing.detail).toBe(
      'not checked: no recorded OCSP response covers Test CA (unreadable: response 1: the responder answered status malformedRequest, not successful)',
    );
    expect(checkMark(revocationCheck('x.revocation', 'test chain', chain, { bundle: partial, allowMissing: true, at: AT }))).toBe('WAIVED');
    expect(checkMark(revocationCheck('x.revocation', 'test chain', chain, { at: AT }))).toBe('----');
    const rootOnly = revocationCheck('x.revocation', 'test chain', chain.slice(2), { bundle: partial, at: AT });
    expect(checkMark(rootOnly)).toBe('FAIL');
    expect(rootOnly.detail).toBe("not checked: the test chain has no certificate below its root that NVIDIA's OCSP responder answers for");
    expect(checkMark(revocationCheck('x.revocation', 'test chain', chain.slice(2), { bundle: partial, allowMissing: true, at: AT }))).toBe('WAIVED');
  });
});

describe("a real H100's evidence and NVIDIA's real RIMs with recorded OCSP responses", () => {
  const nvidiaChain = () =>
    realChainPem()
      .match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)!
      .map((pem) => new X509Certificate(pem));

  it("refuses an answer about the real GPU's identity certificate that NVIDIA's CA did not sign, and fails closed when nothing covers it", async () => {
    // The chain's first certificate is the GPU's own, issued by its firmware: like NVIDIA's verifier, Sigil asks about those above it.
    const [, device, issuer] = nvidiaChain();
    const stranger = await issue('CN=Not NVIDIA', '99', null);
    const forged = bundle(
      ocspResponse({
        cert: new Uint8Array(device!.raw),
        issuer: new Uint8Array(issuer!.raw),
        signer: stranger.key,
        thisUpdate: new Date(VECTOR_TIME.getTime() - HOUR),
        nextUpdate: new Date(VECTOR_TIME.getTime() + HOUR),
      }),
    );
    const run = (ocsp: ReturnType<typeof bundle> | undefined, allow?: boolean) =>
      verifyGpuEvidence([gpuEntry()], {
        nonce: VECTOR_NONCE,
        at: VECTOR_TIME,
        ...(ocsp === undefined ? {} : { ocsp }),
        ...(allow === undefined ? {} : { ocspAllowMissing: allow }),
      }).checks.find((c) => c.name === 'gpu[0].revocation')!;
    const refused = run(forged);
    expect(checkMark(refused)).toBe('FAIL');
    expect(refused.detail).toContain(`is not signed by its issuer ${issuer!.subject.match(/CN=([^\n]+)/)![1]} nor by an OCSP signer it certified`);
    expect(checkMark(run(bundle()))).toBe('FAIL');
    expect(run(bundle()).detail).toMatch(/^not checked: no recorded OCSP response covers /);
    expect(checkMark(run(bundle(), true))).toBe('WAIVED');
    expect(checkMark(run(undefined))).toBe('----');
  });

  it('does not use a RIM whose signing chain has no recorded answer when answers are required', () => {
    const rims = [rimText('driver-rim-test.swidtag'), rimText('vbios-rim-test.swidtag')];
    const checks = verifyGpuEvidence([gpuEntry()], { nonce: VECTOR_NONCE, at: VECTOR_TIME, rims, ocsp: bundle() }).checks;
    expect(checkMark(checks.find((c) => c.name === 'gpu.rim[0].revocation')!)).toBe('FAIL');
    expect(checks.find((c) => c.name === 'gpu[0].driver_rim')!.detail).toBe('no verified RIM describes driver 550.90.07 (verified driver RIMs: none)');
    const waived = verifyGpuEvidence([gpuEntry()], { nonce: VECTOR_NONCE, at: VECTOR_TIME, rims, ocsp: bundle(), ocspAllowMissing: true }).checks;
    expect(checkMark(waived.find((c) => c.name === 'gpu.rim[0].revocation')!)).toBe('WAIVED');
    // The real driver RIM (545.00) is now used: it simply describes another driver than this report's.
    expect(waived.find((c) => c.name === 'gpu[0].driver_rim')!.detail).toBe('no verified RIM describes driver 550.90.07 (verified driver RIMs: 545.00)');
  });
});
