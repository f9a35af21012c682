/**
 * Hardware evidence built in the tests, with test roots, so every signature is real: a fake AMD ARK -> ASK -> VCEK
 * chain (RSA-PSS SHA-384 like AMD's, VCEK on P-384) and a fake Intel root -> platform CA -> PCK chain (ECDSA P-256).
 * The layouts follow the AMD SEV-SNP ABI and the Intel TDX DCAP quote v4 format, written independently of the parsers.
 */
import { reportDataV2, type AttestationBinding } from '../../src/protocol/attestation.ts';
import { createHash, generateKeyPairSync, KeyObject, sign, webcrypto, type JsonWebKey } from 'node:crypto';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { SNP_CERT_GUID } from '../../src/verify/evidence/snp-cert-table.ts';
import type { ReferenceValues } from '../../src/verify/reference/reference-values.ts';
import type { TrustRoots } from '../../src/verify/evidence/trust-roots.ts';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const RSA_PSS: RsaHashedKeyGenParams = { name: 'RSA-PSS', hash: 'SHA-384', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]) };
const PSS_SIGN = { name: 'RSA-PSS', saltLength: 48 } as Algorithm;
const ECDSA_P384: EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-384' };
const ECDSA_P256: EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-256' };
const ECDSA_SHA256 = { name: 'ECDSA', hash: 'SHA-256' } as EcdsaParams;

const NOT_BEFORE = new Date('2024-01-01T00:00:00Z');
const NOT_AFTER = new Date('2044-01-01T00:00:00Z');

function caExtensions(pathLength?: number): x509.Extension[] {
  return [
    new x509.BasicConstraintsExtension(true, pathLength, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
  ];
}

async function keyPair(alg: RsaHashedKeyGenParams | EcKeyGenParams): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as CryptoKeyPair;
}

interface Issue {
  serialNumber: string;
  subject: string;
  issuer: x509.X509Certificate;
  publicKey: CryptoKey;
  signingKey: CryptoKey;
  signingAlgorithm: Algorithm;
  extensions?: x509.Extension[];
}

function issue(params: Issue): Promise<x509.X509Certificate> {
  return x509.X509CertificateGenerator.create({ ...params, issuer: params.issuer.subject, notBefore: NOT_BEFORE, notAfter: NOT_AFTER });
}

export interface AmdTestChain {
  ark: x509.X509Certificate;
  ask: x509.X509Certificate;
  vcek: x509.X509Certificate;
  vcekKey: KeyObject;
  /** The ARK's private key, to sign CRLs in tests. */
  arkKey: CryptoKey;
  /** An AMD-style CRL signed by the ARK, revoking nothing; amdCertTable carries it as the CRL entry. */
  crl: x509.X509Crl;
  roots: TrustRoots;
}

/** A CRL signed by the test ARK (RSA-PSS SHA-384 like AMD's), revoking `revokedSerials` (hex), valid over the test chain's lifetime unless told. */
export function amdTestCrl(
  chain: Pick<AmdTestChain, 'ark' | 'arkKey'>,
  revokedSerials: string[] = [],
  validity: { thisUpdate: Date; nextUpdate: Date } = { thisUpdate: NOT_BEFORE, nextUpdate: NOT_AFTER },
): Promise<x509.X509Crl> {
  return x509.X509CrlGenerator.create({
    issuer: chain.ark.subject,
    ...validity,
    entries: revokedSerials.map((serialNumber) => ({ serialNumber, revocationDate: new Date('2024-06-01T00:00:00Z') })),
    signingKey: chain.arkKey,
    signingAlgorithm: PSS_SIGN,
  });
}

/** A fake AMD chain named like AMD's (ARK-Test, SEV-Test, SEV-VCEK). */
export async function createAmdTestChain(product = 'Test'): Promise<AmdTestChain> {
  const arkKeys = await keyPair(RSA_PSS);
  const ark = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: `CN=ARK-${product}, O=Advanced Micro Devices, C=US`,
    notBefore: NOT_BEFORE,
    notAfter: NOT_AFTER,
    keys: arkKeys,
    signingAlgorithm: PSS_SIGN,
    extensions: caExtensions(),
  });
  const askKeys = await keyPair(RSA_PSS);
  const ask = await issue({
    serialNumber: '02',
    subject: `CN=SEV-${product}, O=Advanced Micro Devices, C=US`,
    issuer: ark,
    publicKey: askKeys.publicKey,
    signingKey: arkKeys.privateKey,
    signingAlgorithm: PSS_SIGN,
    extensions: caExtensions(0),
  });
  const vcekKeys = await keyPair(ECDSA_P384);
  const vcek = await issue({
    serialNumber: '03',
    subject: 'CN=SEV-VCEK, O=Advanced Micro Devices, C=US',
    issuer: ask,
    publicKey: vcekKeys.publicKey,
    signingKey: askKeys.privateKey,
    signingAlgorithm: PSS_SIGN,
    extensions: vcekExtensions(),
  });
  const crl = await amdTestCrl({ ark, arkKey: arkKeys.privateKey });
  return {
    ark,
    ask,
    vcek,
    vcekKey: KeyObject.from(vcekKeys.privateKey),
    arkKey: arkKeys.privateKey,
    crl,
    roots: { amdArks: [ark.toString('pem')], amdIntermediates: [ask.toString('pem')], intelRoots: [] },
  };
}

/**
 * AMD's VCEK extensions as KDS issues them: each SPL a DER INTEGER, hwID the 64 raw bytes of CHIP_ID. The values
 * match what buildSnpReport writes by default (TCB bootloader 4, tee 0, snp 24, microcode 219; CHIP_ID 0xc1 x 64).
 */
function vcekExtensions(): x509.Extension[] {
  const int = (oid: string, value: number[]) => new x509.Extension(oid, false, Uint8Array.from([0x02, value.length, ...value]));
  return [
    int('1.3.6.1.4.1.3704.1.3.1', [4]),
    int('1.3.6.1.4.1.3704.1.3.2', [0]),
    int('1.3.6.1.4.1.3704.1.3.3', [24]),
    int('1.3.6.1.4.1.3704.1.3.8', [0, 219]),
    new x509.Extension('1.3.6.1.4.1.3704.1.4', false, new Uint8Array(64).fill(0xc1)),
  ];
}

export interface SnpReportFields {
  version?: number;
  policy?: bigint;
  reportData: Uint8Array;
  measurement: Uint8Array;
  chipId?: Uint8Array;
  /** 0: VCEK, 1: VLEK. */
  signingKey?: number;
  /** CPUID family and model (report v3+, offsets 0x188 and 0x189); default zero, a CPU no product line names. */
  cpuid?: { family: number; model: number };
  /** LAUNCH_MIT_VECTOR and CURRENT_MIT_VECTOR (report v5, offsets 0x1F8 and 0x200); default zero. */
  mitigationVectors?: { launch: bigint; current: bigint };
}

const SNP_REPORT_SIZE = 0x4a0;
const SNP_SIGNED = 0x2a0;

const clear = <K extends string>(...bits: K[]) => Object.fromEntries(bits.map((b) => [b, [false]])) as Record<K, boolean[]>;

/** Reference values pinning every value a `buildSnpReport` report shows by default (its fields, platform and chip), and the manifest. */
export function pinnedSnpReference(measurement: Uint8Array, manifestSha384: string): ReferenceValues {
  return {
    sigil: { manifest_sha384: [manifestSha384] },
    snp: {
      measurement: [Buffer.from(measurement).toString('hex')],
      host_data: ['00'.repeat(32)],
      vmpl: [0],
      policy: { smt: [true], ...clear('single_socket', 'cxl_allowed', 'mem_aes_256_xts', 'rapl_disabled', 'ciphertext_hiding', 'page_swap_disabled') },
      platform_info: clear('smt_enabled', 'tsme_enabled', 'ecc_enabled', 'rapl_disabled', 'ciphertext_hiding_enabled', 'alias_check_complete'),
      min_tcb: { bootloader: 4, tee: 0, snp: 24, microcode: 219 },
      min_build: 0,
      min_api_version: { major: 0, minor: 0 },
      family_id: ['00'.repeat(16)],
      image_id: ['00'.repeat(16)],
      id_key_digest: ['00'.repeat(48)],
      min_guest_svn: 3,
      chip_id: ['c1'.repeat(64)],
      min_launch_mit_vector: 0n,
      min_current_mit_vector: 0n,
    },
  };
}

/**
 * A reference-values file (YAML) pinning the platform values a `buildSnpReport` report shows by default, and
 * nothing a release manifest states (no measurement, no manifest): what an auditor adds next to a release.
 */
export const SNP_PLATFORM_VALUES_YAML = `snp:
  vmpl: 0
  host_data: ${'00'.repeat(32)}
  min_tcb: { bootloader: 4, tee: 0, snp: 24, microcode: 219 }
  min_build: 0
  min_api_version: "0.0"
  min_guest_svn: 0
  min_launch_mit_vector: 0
  min_current_mit_vector: 0
  chip_id: [${'c1'.repeat(64)}]
  policy: { smt: true, single_socket: false, cxl_allowed: false, mem_aes_256_xts: false, rapl_disabled: false, ciphertext_hiding: false, page_swap_disabled: false }
  platform_info: { smt_enabled: false, tsme_enabled: false, ecc_enabled: false, rapl_disabled: false, ciphertext_hiding_enabled: false, alias_check_complete: false }
`;

/** An SEV-SNP attestation report signed with `key` in AMD's layout: r and s little-endian, 72 bytes each. */
export function buildSnpReport(fields: SnpReportFields, key: KeyObject): Uint8Array {
  const report = Buffer.alloc(SNP_REPORT_SIZE);
  report.writeUInt32LE(fields.version ?? 5, 0x00);
  report.writeUInt32LE(3, 0x04);
  report.writeBigUInt64LE(fields.policy ?? 0x30000n, 0x08);
  report.writeUInt32LE(0, 0x30);
  report.writeUInt32LE(1, 0x34);
  const tcb = Buffer.from([0x04, 0x00, 0, 0, 0, 0, 0x18, 0xdb]);
  tcb.copy(report, 0x38);
  report.writeUInt32LE((fields.signingKey ?? 0) << 2, 0x48);
  Buffer.from(fields.reportData).copy(report, 0x50);
  Buffer.from(fields.measurement).copy(report, 0x90);
  tcb.copy(report, 0x180);
  if (fields.cpuid !== undefined) {
    report.writeUInt8(fields.cpuid.family, 0x188);
    report.writeUInt8(fields.cpuid.model, 0x189);
  }
  Buffer.from(fields.chipId ?? Buffer.alloc(64, 0xc1)).copy(report, 0x1a0);
  tcb.copy(report, 0x1e0);
  tcb.copy(report, 0x1f0);
  if (fields.mitigationVectors !== undefined) {
    report.writeBigUInt64LE(fields.mitigationVectors.launch, 0x1f8);
    report.writeBigUInt64LE(fields.mitigationVectors.current, 0x200);
  }
  return resignSnpReport(report, key);
}

/** The report signed again with `key` (a test VCEK) over bytes 0x000-0x29F, in AMD's layout; what follows the signature is kept. */
export function resignSnpReport(bytes: Uint8Array, key: KeyObject): Uint8Array {
  const report = Buffer.from(bytes);
  const sig = sign('sha384', report.subarray(0, SNP_SIGNED), { key, dsaEncoding: 'ieee-p1363' });
  Buffer.from(sig.subarray(0, 48)).reverse().copy(report, SNP_SIGNED);
  Buffer.from(sig.subarray(48, 96))
    .reverse()
    .copy(report, SNP_SIGNED + 72);
  return new Uint8Array(report);
}

/** The GHCB certificate table: 24-byte {guid, offset, length} entries, a zero entry, then the DER blobs. */
export function buildSnpCertTable(entries: Array<{ guid: string; der: Uint8Array }>): Uint8Array {
  const tableSize = (entries.length + 1) * 24;
  const total = tableSize + entries.reduce((n, e) => n + e.der.length, 0);
  const out = Buffer.alloc(total);
  let dataAt = tableSize;
  entries.forEach((entry, i) => {
    Buffer.from(entry.guid.replace(/-/g, ''), 'hex').copy(out, i * 24);
    out.writeUInt32LE(dataAt, i * 24 + 16);
    out.writeUInt32LE(entry.der.length, i * 24 + 20);
    Buffer.from(entry.der).copy(out, dataAt);
    dataAt += entry.der.length;
  });
  return new Uint8Array(out);
}

/** The certificate table of a test chain: VCEK, ASK, ARK and, when the chain has one, the ARK's CRL. */
export function amdCertTable(chain: Pick<AmdTestChain, 'ark' | 'ask' | 'vcek'> & { crl?: x509.X509Crl }): Uint8Array {
  return buildSnpCertTable([
    { guid: SNP_CERT_GUID.vcek, der: new Uint8Array(chain.vcek.rawData) },
    { guid: SNP_CERT_GUID.ask, der: new Uint8Array(chain.ask.rawData) },
    { guid: SNP_CERT_GUID.ark, der: new Uint8Array(chain.ark.rawData) },
    ...(chain.crl === undefined ? [] : [{ guid: SNP_CERT_GUID.crl, der: new Uint8Array(chain.crl.rawData) }]),
  ]);
}

export interface IntelTestChain {
  root: x509.X509Certificate;
  platformCa: x509.X509Certificate;
  pck: x509.X509Certificate;
  pckKey: KeyObject;
  roots: TrustRoots;
}

export async function createIntelTestChain(): Promise<IntelTestChain> {
  const rootKeys = await keyPair(ECDSA_P256);
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '11',
    name: 'CN=Test SGX Root CA, O=Test Corporation, C=US',
    notBefore: NOT_BEFORE,
    notAfter: NOT_AFTER,
    keys: rootKeys,
    signingAlgorithm: ECDSA_SHA256,
    extensions: caExtensions(1),
  });
  const caKeys = await keyPair(ECDSA_P256);
  const platformCa = await issue({
    serialNumber: '12',
    subject: 'CN=Test SGX PCK Platform CA, O=Test Corporation, C=US',
    issuer: root,
    publicKey: caKeys.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: ECDSA_SHA256,
    extensions: caExtensions(0),
  });
  const pckKeys = await keyPair(ECDSA_P256);
  const pck = await issue({
    serialNumber: '13',
    subject: 'CN=Test SGX PCK Certificate, O=Test Corporation, C=US',
    issuer: platformCa,
    publicKey: pckKeys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ECDSA_SHA256,
  });
  return {
    root,
    platformCa,
    pck,
    pckKey: KeyObject.from(pckKeys.privateKey),
    roots: { amdArks: [], amdIntermediates: [], intelRoots: [root.toString('pem')] },
  };
}

export interface TdxQuoteFields {
  reportData: Uint8Array;
  mrTd: Uint8Array;
  tdAttributes?: Uint8Array;
  /** RTMR0-3 (by default RTMR0-2 all zero and RTMR3 extended once with TEST_START_EVENT, as after Sigil's start). */
  rtmrs?: Uint8Array[];
  mrConfigId?: Uint8Array;
  /** TEE_TCB_SVN (16 bytes; 04 01 07 00... by default). */
  teeTcbSvn?: Uint8Array;
  /** Breaks the QE report's binding of the attestation key when set. */
  unboundQeReport?: boolean;
}

function rawP256(jwk: JsonWebKey): Buffer {
  return Buffer.concat([Buffer.from(jwk.x!, 'base64url'), Buffer.from(jwk.y!, 'base64url')]);
}

/** A TDX quote v4 whose QE report binds a fresh attestation key and is signed by the chain's PCK key. */
export function buildTdxQuote(fields: TdxQuoteFields, chain: Pick<IntelTestChain, 'root' | 'platformCa' | 'pck' | 'pckKey'>): Uint8Array {
  const header = Buffer.alloc(48);
  header.writeUInt16LE(4, 0);
  header.writeUInt16LE(2, 2);
  header.writeUInt32LE(0x81, 4);
  header.writeUInt16LE(7, 8);
  header.writeUInt16LE(11, 10);
  Buffer.from('939a7233f79c4ca9940a0db3957f0607', 'hex').copy(header, 12);
  const body = Buffer.alloc(584);
  Buffer.from([4, 1, 7, 0]).copy(body, 0);
  body.fill(0x5e, 16, 64);
  Buffer.from(fields.tdAttributes ?? Buffer.alloc(8)).copy(body, 120);
  Buffer.from('e718060000000000', 'hex').copy(body, 128);
  Buffer.from(fields.mrTd).copy(body, 136);
  if (fields.teeTcbSvn !== undefined) Buffer.from(fields.teeTcbSvn).copy(body, 0);
  if (fields.mrConfigId !== undefined) Buffer.from(fields.mrConfigId).copy(body, 184);
  (fields.rtmrs ?? [Buffer.alloc(48), Buffer.alloc(48), Buffer.alloc(48), TEST_RTMR3]).forEach((rtmr, i) => Buffer.from(rtmr).copy(body, 328 + 48 * i));
  Buffer.from(fields.reportData).copy(body, 520);

  const ak = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const akRaw = rawP256(ak.publicKey.export({ format: 'jwk' }));
  const signature = sign('sha256', Buffer.concat([header, body]), { key: ak.privateKey, dsaEncoding: 'ieee-p1363' });

  const authData = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
  const qeReport = Buffer.alloc(384);
  qeReport.fill(0x07, 0, 16);
  qeReport.fill(0x8c, 128, 160);
  qeReport.writeUInt16LE(1, 256);
  qeReport.writeUInt16LE(8, 258);
  const binding = createHash('sha256')
    .update(akRaw)
    .update(fields.unboundQeReport === true ? Buffer.from('other') : authData)
    .digest();
  binding.copy(qeReport, 320);
  const qeSignature = sign('sha256', qeReport, { key: chain.pckKey, dsaEncoding: 'ieee-p1363' });

  const pem = Buffer.from([chain.pck, chain.platformCa, chain.root].map((c) => c.toString('pem')).join('\n') + '\n\0', 'latin1');
  const inner = Buffer.alloc(6);
  inner.writeUInt16LE(5, 0);
  inner.writeUInt32LE(pem.length, 2);
  const authLength = Buffer.alloc(2);
  authLength.writeUInt16LE(authData.length, 0);
  const qeCertData = Buffer.concat([qeReport, qeSignature, authLength, authData, inner, pem]);
  const outer = Buffer.alloc(6);
  outer.writeUInt16LE(6, 0);
  outer.writeUInt32LE(qeCertData.length, 2);
  const sigData = Buffer.concat([signature, akRaw, outer, qeCertData]);
  const sigLength = Buffer.alloc(4);
  sigLength.writeUInt32LE(sigData.length, 0);
  return new Uint8Array(Buffer.concat([header, body, sigLength, sigData]));
}

/** A receipt-signing JWKS like Sigil's: one P-256 public key. */
export function testJwks(): { keys: Array<Record<string, string>> } {
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  return { keys: [{ kty: 'EC', crv: 'P-256', x: jwk.x!, y: jwk.y!, use: 'sig', alg: 'ES256', kid: 'test-key' }] };
}

const TEST_POLICY_HASH = 'sha256:' + '11'.repeat(32);
/** The one runtime event a test document lists: Sigil started at a fixed time with a fixed manifest. */
export const TEST_START_EVENT = (() => {
  const payload = JSON.stringify({
    at: '2026-01-01T00:00:00.000Z',
    kind: 'sigil-event/2',
    manifest_sha384: '4d'.repeat(48),
    policy_hash: TEST_POLICY_HASH,
    reason: 'start',
    seq: 0,
  });
  return { imr: 3, event: 'sigil', digest: createHash('sha384').update(payload).digest('hex'), payload };
})();

/** RTMR3 after Sigil extended TEST_START_EVENT into an all-zero register. */
const TEST_RTMR3 = createHash('sha384').update(Buffer.alloc(48)).update(Buffer.from(TEST_START_EVENT.digest, 'hex')).digest();

/** The binding a test document states: the given JWKS, a fixed policy hash and manifest, keys made in the enclave, no TLS, no HPKE, no GPU. */
export function testBinding(jwks: object): AttestationBinding {
  return {
    jwks: jwks as AttestationBinding['jwks'],
    policy_hash: TEST_POLICY_HASH,
    tls_spki_sha256: null,
    hpke_key_config: null,
    gpu_evidence_sha256: [],
    manifest_sha384: '4d'.repeat(48),
    key_origin: { receipt: { origin: 'generated' }, tls: null, hpke: null },
    runtime_events_sha384: [TEST_START_EVENT.digest],
  };
}

/** REPORT_DATA a test document's evidence must carry for `nonce` and `testBinding(jwks)` (SPEC 5). */
export function expectedReportData(nonce: Uint8Array, jwks: object): Uint8Array {
  return reportDataV2(nonce, testBinding(jwks));
}

function documentV2(
  tee: 'sev-snp' | 'tdx',
  evidence: Uint8Array,
  nonce: Uint8Array,
  jwks: object,
  measurement: string,
  reportData: Uint8Array,
): Record<string, unknown> {
  return {
    version: 2,
    tee,
    measurement,
    nonce: Buffer.from(nonce).toString('hex'),
    binding: testBinding(jwks),
    report_data: Buffer.from(reportData).toString('hex'),
    evidence: Buffer.from(evidence).toString('base64'),
    // On SEV-SNP the binding vouches for the events; on TDX a test quote's RTMR3 also holds the event.
    event_log: {
      ccel_table: null,
      ccel_data: null,
      runtime_events: [TEST_START_EVENT],
      self_measurement: tee === 'tdx' ? { extended: true, reason: null } : { extended: false, reason: 'SEV-SNP has no runtime measurement register' },
    },
    gpu_evidence: [],
  };
}

export function snpDocument(
  report: Uint8Array,
  certificates: Uint8Array,
  nonce: Uint8Array,
  jwks: object,
  measurement: string,
  reportData: Uint8Array,
): Record<string, unknown> {
  return documentV2('sev-snp', Buffer.concat([report, certificates]), nonce, jwks, measurement, reportData);
}

export function tdxDocument(quote: Uint8Array, nonce: Uint8Array, jwks: object, measurement: string, reportData: Uint8Array): Record<string, unknown> {
  return documentV2('tdx', quote, nonce, jwks, measurement, reportData);
}
