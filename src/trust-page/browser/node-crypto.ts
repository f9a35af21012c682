import 'reflect-metadata';
import { AsnConvert } from '@peculiar/asn1-schema';
import { RSAPublicKey, RsaSaPssParams } from '@peculiar/asn1-rsa';
import { SubjectPublicKeyInfo } from '@peculiar/asn1-x509';
import { p256, p384 } from '@noble/curves/nist.js';
import { sha256, sha384, sha512 } from '@noble/hashes/sha2.js';
import * as x509 from '@peculiar/x509';
import * as asn1js from 'asn1js';
import forge from 'node-forge';
import { Buffer } from 'node:buffer';
import { SigilError } from '../../protocol/sigil-error.ts';

/**
 * The subset of node:crypto that Sigil's verifier (src/verify, src/protocol) uses, for the browser bundle
 * of the trust page: the same verifier code runs in Node and in the page. WebCrypto is asynchronous and
 * the verifier's checks are synchronous, so this adapter stands on audited synchronous libraries instead:
 * @noble/hashes (SHA-2), @noble/curves (ECDSA P-256/P-384), node-forge (RSA PKCS#1 v1.5 and PSS),
 * @peculiar/x509 and asn1js (certificate parsing). No cryptographic primitive is written here: only the
 * plumbing from node's API shapes to theirs. The GPU verifier (src/verify/gpu) needs nothing beyond this: ECDSA P-384
 * with SHA-384 in IEEE P1363 form for the SPDM report and the RIMs' XML signatures, and a key exported as PEM SPKI,
 * which is how the RIM verifier hands the signer's key to xml-crypto (bundled with `crypto` aliased to this file).
 */

/** A key, certificate or hash the page's crypto cannot read or does not support: the check that needed it fails with this. */
export class BrowserCryptoError extends SigilError<'ERR_BROWSER_CRYPTO'> {
  constructor(message: string) {
    super('ERR_BROWSER_CRYPTO', message);
  }
}

type Bytes = Uint8Array;
type HashName = 'sha256' | 'sha384' | 'sha512';

const HASHES = { sha256, sha384, sha512 } as const;
const OID_EC = '1.2.840.10045.2.1';
const OID_RSA = '1.2.840.113549.1.1.1';
const OID_RSA_PSS = '1.2.840.113549.1.1.10';
const CURVES: Record<string, { name: 'P-256' | 'P-384'; curve: typeof p256 }> = {
  '1.2.840.10045.3.1.7': { name: 'P-256', curve: p256 },
  '1.3.132.0.34': { name: 'P-384', curve: p384 },
};
const SIGNATURE_ALGORITHMS: Record<string, { kind: 'ecdsa' | 'rsa' | 'pss'; hash: HashName }> = {
  '1.2.840.10045.4.3.2': { kind: 'ecdsa', hash: 'sha256' },
  '1.2.840.10045.4.3.3': { kind: 'ecdsa', hash: 'sha384' },
  '1.2.840.10045.4.3.4': { kind: 'ecdsa', hash: 'sha512' },
  '1.2.840.113549.1.1.11': { kind: 'rsa', hash: 'sha256' },
  '1.2.840.113549.1.1.12': { kind: 'rsa', hash: 'sha384' },
  '1.2.840.113549.1.1.13': { kind: 'rsa', hash: 'sha512' },
};
const HASH_OIDS: Record<string, HashName> = {
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};

function toBytes(data: string | Bytes | ArrayBuffer, encoding?: string): Bytes {
  if (typeof data === 'string') return encoding === 'hex' ? Uint8Array.from(data.match(/../g) ?? [], (h) => parseInt(h, 16)) : new TextEncoder().encode(data);
  return data instanceof Uint8Array ? data : new Uint8Array(data);
}

function hexOf(bytes: Bytes): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function hashName(algorithm: string): HashName {
  const name = algorithm.toLowerCase().replace('-', '') as HashName;
  if (!(name in HASHES)) throw new BrowserCryptoError(`unsupported hash ${algorithm}`);
  return name;
}

/** node:crypto's Hash, for SHA-256/384/512. */
export function createHash(algorithm: string) {
  const state = HASHES[hashName(algorithm)].create();
  const hash = {
    update(data: string | Bytes, encoding?: string) {
      state.update(toBytes(data, encoding));
      return hash;
    },
    digest(encoding?: 'hex' | 'base64') {
      const out = state.digest();
      if (encoding === 'hex') return hexOf(out);
      if (encoding === 'base64') return Buffer.from(out).toString('base64');
      return Buffer.from(out);
    },
  };
  return hash;
}

/** A public key as node's KeyObject shows it to the verifier. */
export class KeyObject {
  readonly type = 'public';
  constructor(
    readonly asymmetricKeyType: 'ec' | 'rsa' | 'rsa-pss',
    readonly spki: Bytes,
    readonly ec?: { curve: typeof p256; namedCurve: 'P-256' | 'P-384'; point: Bytes },
    readonly rsa?: forge.pki.rsa.PublicKey,
  ) {}

  get asymmetricKeyDetails() {
    return this.ec === undefined ? {} : { namedCurve: this.ec.namedCurve === 'P-256' ? 'prime256v1' : 'secp384r1' };
  }

  export(options: { type?: string; format?: string } = {}) {
    if (options.format === 'jwk' && this.ec !== undefined) {
      const size = this.ec.namedCurve === 'P-256' ? 32 : 48;
      const b64 = (b: Bytes) => Buffer.from(b).toString('base64url');
      return { kty: 'EC', crv: this.ec.namedCurve, x: b64(this.ec.point.subarray(1, 1 + size)), y: b64(this.ec.point.subarray(1 + size)) };
    }
    if (options.format === 'pem') {
      const lines =
        Buffer.from(this.spki)
          .toString('base64')
          .match(/.{1,64}/g) ?? [];
      return `-----BEGIN PUBLIC KEY-----\n${lines.join('\n')}\n-----END PUBLIC KEY-----\n`;
    }
    return Buffer.from(this.spki);
  }

  static fromSpki(spki: Bytes): KeyObject {
    const info = AsnConvert.parse(spki, SubjectPublicKeyInfo);
    const oid = info.algorithm.algorithm;
    const bits = new Uint8Array(info.subjectPublicKey);
    if (oid === OID_EC) {
      const curveOid = oidOf(info.algorithm.parameters!);
      const curve = CURVES[curveOid];
      if (curve === undefined) throw new BrowserCryptoError(`unsupported EC curve ${curveOid}`);
      return new KeyObject('ec', spki, { curve: curve.curve, namedCurve: curve.name, point: bits });
    }
    if (oid === OID_RSA || oid === OID_RSA_PSS) {
      const rsa = AsnConvert.parse(bits, RSAPublicKey);
      const big = (b: ArrayBuffer) => new forge.jsbn.BigInteger(hexOf(new Uint8Array(b)), 16);
      return new KeyObject(oid === OID_RSA ? 'rsa' : 'rsa-pss', spki, undefined, forge.pki.setRsaPublicKey(big(rsa.modulus), big(rsa.publicExponent)));
    }
    throw new BrowserCryptoError(`unsupported public key algorithm ${oid}`);
  }
}

/** The dotted text of a DER OBJECT IDENTIFIER, or of the first OID in a DER SEQUENCE (an AlgorithmIdentifier). */
function oidOf(der: ArrayBuffer | Bytes): string {
  const parsed = asn1js.fromBER(der instanceof Uint8Array ? Uint8Array.from(der).buffer : der).result;
  const oid = parsed instanceof asn1js.Sequence ? parsed.valueBlock.value[0] : parsed;
  if (!(oid instanceof asn1js.ObjectIdentifier)) throw new BrowserCryptoError('no OBJECT IDENTIFIER where one was expected');
  return oid.valueBlock.toString();
}

function pemBody(pem: string): Bytes {
  const base64 = pem.replace(/-----(BEGIN|END) [^-]+-----/g, '').replace(/\s+/g, '');
  return Buffer.from(base64, 'base64');
}

/** node:crypto's createPublicKey for what the verifier passes: an EC JWK, a PEM or DER SPKI, or a KeyObject. */
export function createPublicKey(input: unknown): KeyObject {
  if (input instanceof KeyObject) return input;
  if (typeof input === 'string') return KeyObject.fromSpki(pemBody(input));
  const spec = input as { key: unknown; format?: string };
  if (spec.format === 'jwk') {
    const jwk = spec.key as { kty?: string; crv?: string; x?: string; y?: string };
    const curve = jwk.crv === 'P-256' ? p256 : jwk.crv === 'P-384' ? p384 : undefined;
    if (jwk.kty !== 'EC' || curve === undefined || jwk.x === undefined || jwk.y === undefined) throw new TypeError('Invalid JWK EC key');
    const x = Buffer.from(jwk.x, 'base64url');
    const y = Buffer.from(jwk.y, 'base64url');
    const point = new Uint8Array([4, ...x, ...y]);
    curve.Point.fromBytes(point).assertValidity();
    const oid = jwk.crv === 'P-256' ? '1.2.840.10045.3.1.7' : '1.3.132.0.34';
    const spki = new asn1js.Sequence({
      value: [
        new asn1js.Sequence({ value: [new asn1js.ObjectIdentifier({ value: OID_EC }), new asn1js.ObjectIdentifier({ value: oid })] }),
        new asn1js.BitString({ valueHex: point }),
      ],
    }).toBER();
    return new KeyObject('ec', new Uint8Array(spki), { curve, namedCurve: jwk.crv as 'P-256' | 'P-384', point });
  }
  if (typeof spec.key === 'string') return KeyObject.fromSpki(pemBody(spec.key));
  return KeyObject.fromSpki(toBytes(spec.key as Bytes));
}

interface VerifyKey {
  key: KeyObject;
  dsaEncoding?: 'der' | 'ieee-p1363';
  padding?: number;
  saltLength?: number;
}

const RSA_PKCS1_PSS_PADDING = 6;
export const constants = { RSA_PKCS1_PSS_PADDING, RSA_PSS_SALTLEN_DIGEST: -1, RSA_PSS_SALTLEN_AUTO: -2 };

function forgeDigest(hash: HashName, data: Bytes): forge.md.MessageDigest {
  const md = forge.md[hash].create();
  md.update(forge.util.binary.raw.encode(data));
  return md;
}

function verifyWith(hash: HashName, data: Bytes, spec: VerifyKey, signature: Bytes, pss?: { saltLength: number; mgfHash: HashName }): boolean {
  const { key } = spec;
  if (key.ec !== undefined) {
    const digest = HASHES[hash](data);
    const format = spec.dsaEncoding === 'ieee-p1363' ? 'compact' : 'der';
    try {
      return key.ec.curve.verify(signature, digest, key.ec.point, { prehash: false, lowS: false, format });
    } catch {
      return false;
    }
  }
  if (key.rsa !== undefined) {
    const raw = forge.util.binary.raw.encode(signature);
    try {
      if (pss !== undefined) {
        const scheme = forge.pss.create({
          md: forge.md[hash].create(),
          mgf: forge.mgf.mgf1.create(forge.md[pss.mgfHash].create()),
          saltLength: pss.saltLength,
        });
        return key.rsa.verify(forgeDigest(hash, data).digest().bytes(), raw, scheme);
      }
      return key.rsa.verify(forgeDigest(hash, data).digest().bytes(), raw);
    } catch {
      return false;
    }
  }
  return false;
}

/** node:crypto's one-shot verify: ECDSA (DER or IEEE P1363 signatures), RSA PKCS#1 v1.5 or PSS. */
export function verify(algorithm: string | null, data: Bytes, key: KeyObject | VerifyKey, signature: Bytes): boolean {
  const spec: VerifyKey = key instanceof KeyObject ? { key } : key;
  const hash = hashName(algorithm ?? 'sha256');
  const pss =
    spec.padding === RSA_PKCS1_PSS_PADDING || spec.key.asymmetricKeyType === 'rsa-pss'
      ? { saltLength: spec.saltLength ?? HASHES[hash].outputLen, mgfHash: hash }
      : undefined;
  return verifyWith(hash, toBytes(data), spec, toBytes(signature), pss);
}

/** Splits a DER certificate (or CRL) into the signed bytes, the signature algorithm and the signature. */
function signedParts(der: Bytes): { tbs: Bytes; algorithm: string; params: Bytes | undefined; signature: Bytes } {
  const parsed = asn1js.fromBER(der);
  if (parsed.offset === -1) throw new BrowserCryptoError('not DER');
  const [tbs, algorithm, signature] = (parsed.result as asn1js.Sequence).valueBlock.value as [asn1js.Sequence, asn1js.Sequence, asn1js.BitString];
  const [oid, params] = algorithm.valueBlock.value as [asn1js.ObjectIdentifier, asn1js.BaseBlock | undefined];
  return {
    tbs: new Uint8Array(tbs.valueBeforeDecodeView),
    algorithm: oid.valueBlock.toString(),
    params: params === undefined || params instanceof asn1js.Null ? undefined : new Uint8Array(params.valueBeforeDecodeView),
    signature: new Uint8Array(signature.valueBlock.valueHexView),
  };
}

/** Whether `der`'s signature verifies under `key`, for the X.509 signature algorithms the vendors use. */
export function verifySignedStructure(der: Bytes, key: KeyObject): boolean {
  const { tbs, algorithm, params, signature } = signedParts(der);
  if (algorithm === OID_RSA_PSS) {
    const p = params === undefined ? new RsaSaPssParams() : AsnConvert.parse(params, RsaSaPssParams);
    const hash = HASH_OIDS[p.hashAlgorithm.algorithm];
    const mgfParameters = p.maskGenAlgorithm.parameters;
    const mgfHash = mgfParameters === undefined || mgfParameters === null ? 'sha256' : HASH_OIDS[oidOf(mgfParameters)];
    if (hash === undefined || mgfHash === undefined) return false;
    return verifyWith(hash, tbs, { key }, signature, { saltLength: p.saltLength, mgfHash });
  }
  const known = SIGNATURE_ALGORITHMS[algorithm];
  if (known === undefined) return false;
  return verifyWith(known.hash, tbs, { key, dsaEncoding: 'der' }, signature);
}

function nameLines(name: x509.Name): string {
  return name
    .toJSON()
    .flatMap((rdn) => Object.entries(rdn).flatMap(([type, values]) => values.map((v) => `${type}=${v}`)))
    .join('\n');
}

/** node:crypto's X509Certificate, for the properties and methods the verifier uses. */
export class X509Certificate {
  readonly raw: Buffer;
  private readonly parsed: x509.X509Certificate;

  constructor(input: string | Bytes) {
    const der = typeof input === 'string' ? pemBody(input) : toBytes(input);
    this.raw = Buffer.from(der);
    this.parsed = new x509.X509Certificate(Uint8Array.from(der).buffer);
  }

  get subject(): string {
    return nameLines(this.parsed.subjectName);
  }
  get issuer(): string {
    return nameLines(this.parsed.issuerName);
  }
  get serialNumber(): string {
    return this.parsed.serialNumber.toUpperCase();
  }
  get validFrom(): string {
    return this.parsed.notBefore.toUTCString();
  }
  get validTo(): string {
    return this.parsed.notAfter.toUTCString();
  }
  get validFromDate(): Date {
    return this.parsed.notBefore;
  }
  get validToDate(): Date {
    return this.parsed.notAfter;
  }
  get fingerprint256(): string {
    return hexOf(sha256(this.raw)).toUpperCase().match(/../g)!.join(':');
  }
  get publicKey(): KeyObject {
    return KeyObject.fromSpki(new Uint8Array(this.parsed.publicKey.rawData));
  }
  get ca(): boolean {
    return this.parsed.getExtension(x509.BasicConstraintsExtension)?.ca ?? false;
  }
  checkIssued(other: X509Certificate): boolean {
    return this.parsed.issuerName.toString() === other.parsed.subjectName.toString();
  }
  verify(key: KeyObject): boolean {
    return verifySignedStructure(this.raw, key);
  }
  toString(): string {
    return this.parsed.toString('pem');
  }
}

export function randomBytes(size: number): Bytes {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(size)));
}

export function timingSafeEqual(a: Bytes, b: Bytes): boolean {
  if (a.length !== b.length) throw new RangeError('Input buffers must have the same byte length');
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export const webcrypto = globalThis.crypto;
export default { createHash, createPublicKey, verify, X509Certificate, KeyObject, constants, randomBytes, timingSafeEqual, webcrypto };
