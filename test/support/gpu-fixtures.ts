/**
 * GPU evidence for the tests: the real H100 report, chain and RIMs of test/vectors/nvidia, and RIMs made here from
 * the real report's own measurements, signed by a test RIM chain (P-384, like NVIDIA's), so the matching path runs
 * on real measurements with every signature real.
 */
import { KeyObject, sign, webcrypto, type BinaryLike, type KeyLike } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createOptionalCallbackFunction, SignedXml } from 'xml-crypto';
import type { GpuEvidence } from '../../src/protocol/attestation.ts';
import {
  C14N_11,
  C14n11OverWholeDocument,
  DIGEST_SHA384,
  ECDSA_SHA384,
  EcdsaSha384Signature,
  ENVELOPED,
  Sha384Digest,
} from '../../src/verify/gpu/rim-signature.ts';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

export const NVIDIA_VECTORS = join(import.meta.dirname, '..', 'vectors', 'nvidia');
/** Every certificate of the real chain and the real RIMs is valid then (the RIM signers expired in June 2025). */
export const VECTOR_TIME = new Date('2024-06-01T00:00:00Z');
/** The nonce in the real report's GET_MEASUREMENTS request. */
export const VECTOR_NONCE = '931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb';

export function nvidiaVector(name: string): Buffer {
  return readFileSync(join(NVIDIA_VECTORS, name));
}

export function realReport(): Buffer {
  return Buffer.from(nvidiaVector('hopper-attestation-report.hex').toString('utf8').trim(), 'hex');
}

export function realChainPem(): string {
  return nvidiaVector('hopper-cert-chain.pem').toString('utf8');
}

export function rimText(name: 'driver-rim-test.swidtag' | 'vbios-rim-test.swidtag' | 'vbios-rim-prod-96005E0001.swidtag'): string {
  return nvidiaVector(name).toString('utf8');
}

/** A GPU evidence entry as the server publishes it. */
export function gpuEntry(report: Uint8Array = realReport(), chainPem: string = realChainPem(), nonce = VECTOR_NONCE): GpuEvidence {
  return { index: 0, arch: 'hopper', report: Buffer.from(report).toString('base64'), certificates: Buffer.from(chainPem, 'latin1').toString('base64'), nonce };
}

/** The real report's measurements by NVIDIA's index (SPDM index - 1), read independently of the parser. */
export function realMeasurements(): Map<number, string> {
  const r = realReport().subarray(37);
  const length = r[5]! | (r[6]! << 8) | (r[7]! << 16);
  const out = new Map<number, string>();
  for (let o = 8; o < 8 + length;) {
    const size = r.readUInt16LE(o + 2);
    out.set(r[o]! - 1, r.subarray(o + 7, o + 4 + size).toString('hex'));
    o += 4 + size;
  }
  return out;
}

export interface RimTestChain {
  rootPem: string;
  /** Signer first, root last, as NVIDIA's KeyInfo lists them. */
  certificates: x509.X509Certificate[];
  signingKey: KeyObject;
}

const P384: EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-384' };
const SHA384_SIGN = { name: 'ECDSA', hash: 'SHA-384' } as EcdsaParams;

export async function createRimTestChain(): Promise<RimTestChain> {
  const notBefore = new Date('2023-01-01T00:00:00Z');
  const notAfter = new Date('2043-01-01T00:00:00Z');
  const rootKeys = (await webcrypto.subtle.generateKey(P384, true, ['sign', 'verify'])) as CryptoKeyPair;
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=Test CoRIM signing Root CA, O=Sigil tests',
    notBefore,
    notAfter,
    keys: rootKeys,
    signingAlgorithm: SHA384_SIGN,
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
  });
  const signerKeys = (await webcrypto.subtle.generateKey(P384, true, ['sign', 'verify'])) as CryptoKeyPair;
  const signer = await x509.X509CertificateGenerator.create({
    serialNumber: '02',
    subject: 'CN=Test RIM Signer, O=Sigil tests',
    issuer: root.subject,
    notBefore,
    notAfter,
    publicKey: signerKeys.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: SHA384_SIGN,
  });
  return { rootPem: root.toString('pem'), certificates: [signer, root], signingKey: KeyObject.from(signerKeys.privateKey) };
}

class SigningEcdsaSha384 extends EcdsaSha384Signature {
  override getSignature = createOptionalCallbackFunction((signedInfo: BinaryLike, key: KeyLike): string =>
    sign('sha384', Buffer.from(signedInfo as string), { key: key as KeyObject, dsaEncoding: 'ieee-p1363' }).toString('base64'),
  );
}

/** Signs a SWID tag the way NVIDIA does: enveloped, whole document, C14N 1.1, SHA-384, ECDSA P-384, chain in KeyInfo. */
export function signRim(unsigned: string, chain: RimTestChain): string {
  const signed = new SignedXml({
    privateKey: chain.signingKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    canonicalizationAlgorithm: C14N_11,
    signatureAlgorithm: ECDSA_SHA384 as 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512',
  });
  signed.CanonicalizationAlgorithms = { ...signed.CanonicalizationAlgorithms, [C14N_11]: C14n11OverWholeDocument } as SignedXml['CanonicalizationAlgorithms'];
  signed.HashAlgorithms = { [DIGEST_SHA384]: Sha384Digest } as SignedXml['HashAlgorithms'];
  signed.SignatureAlgorithms = { [ECDSA_SHA384]: SigningEcdsaSha384 } as SignedXml['SignatureAlgorithms'];
  signed.getKeyInfoContent = ({ prefix }) => {
    const p = prefix ? `${prefix}:` : '';
    return `<${p}X509Data>${chain.certificates.map((c) => `<${p}X509Certificate>${c.toString('base64')}</${p}X509Certificate>`).join('')}</${p}X509Data>`;
  };
  signed.addReference({ xpath: '/*', uri: '', isEmptyUri: true, transforms: [ENVELOPED, C14N_11] as never, digestAlgorithm: DIGEST_SHA384 as never });
  signed.computeSignature(unsigned, { prefix: 'ds', location: { reference: '/*', action: 'append' } });
  return signed.getSignedXml();
}

/**
 * A real RIM turned into one that describes the real report: its signature removed, its version set, and every
 * active measurement's alternatives replaced by the value the report holds at that index.
 */
export function rimMatchingReport(real: string, version: string, change: (index: number, value: string) => string = (_, v) => v): string {
  const measured = realMeasurements();
  return real
    .replace(/<ds:Signature[\s\S]*<\/ds:Signature>/, '')
    .replace(/colloquialVersion="[^"]*"/, `colloquialVersion="${version}"`)
    .replace(/<ns0:Resource type="Measurement" index="(\d+)" active="True" alternatives="\d+" ([^>]*?) name=/g, (_all, index: string) => {
      const i = Number(index);
      return `<ns0:Resource type="Measurement" index="${i}" active="True" alternatives="1" ns2:Hash0="${change(i, measured.get(i)!)}" name=`;
    });
}
