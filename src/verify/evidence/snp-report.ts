import { ByteReader } from './byte-reader.ts';
import { EvidenceError } from './errors.ts';

/** AMD SEV-SNP ABI (pub. 56860), ATTESTATION_REPORT: 0x4A0 bytes whatever the version. */
export const SNP_REPORT_SIZE = 0x4a0;
/** The signature covers bytes 0x000..0x29F; the signature itself starts at 0x2A0. */
export const SNP_SIGNED_LENGTH = 0x2a0;
/** r and s are little-endian, each zero-padded to 72 bytes. */
export const SNP_SIGNATURE_COMPONENT_LENGTH = 72;
/** Report versions whose layout this parser knows (2: Milan firmware, 3: adds CPUID, 5: adds mitigation vectors). */
export const SNP_SUPPORTED_VERSIONS: readonly number[] = [2, 3, 4, 5];
export const SNP_SIGNATURE_ALGO_ECDSA_P384_SHA384 = 1;
/** POLICY bit 19: the guest may be debugged by the host, so its memory is not confidential. */
export const SNP_POLICY_DEBUG_BIT = 19n;

/** TCB_VERSION as Milan and Genoa lay it out (Turin moves fields; the raw value is kept for that reason). */
export interface SnpTcb {
  raw: bigint;
  bootloader: number;
  tee: number;
  snp: number;
  microcode: number;
}

export interface SnpPolicy {
  raw: bigint;
  abiMinor: number;
  abiMajor: number;
  smtAllowed: boolean;
  migrateMa: boolean;
  debug: boolean;
  singleSocket: boolean;
}

/** Which key signed the report, from bits 2-4 of the report's flags. */
export type SnpSigningKey = 'vcek' | 'vlek' | 'none' | 'reserved';

export interface SnpReport {
  version: number;
  guestSvn: number;
  policy: SnpPolicy;
  familyId: Uint8Array;
  imageId: Uint8Array;
  vmpl: number;
  signatureAlgo: number;
  currentTcb: SnpTcb;
  platformInfo: bigint;
  authorKeyEnabled: boolean;
  maskChipKey: boolean;
  signingKey: SnpSigningKey;
  reportData: Uint8Array;
  measurement: Uint8Array;
  hostData: Uint8Array;
  idKeyDigest: Uint8Array;
  authorKeyDigest: Uint8Array;
  reportId: Uint8Array;
  reportIdMa: Uint8Array;
  reportedTcb: SnpTcb;
  chipId: Uint8Array;
  committedTcb: SnpTcb;
  launchTcb: SnpTcb;
  /** LAUNCH_MIT_VECTOR and CURRENT_MIT_VECTOR (0x1F8, 0x200): report version 5 and later only, else absent. */
  mitigationVectors?: { launch: bigint; current: bigint };
  /** Bytes 0x000..0x29F, what the signature covers. */
  signedBytes: Uint8Array;
  /** r and s as big-endian 48-byte integers (P-384), ready for IEEE P1363 verification. */
  signature: { r: Uint8Array; s: Uint8Array };
  /**
   * The unsigned ranges after 0x29F that should be zero and are not, in words (`0x2D0-0x2E7 (the padding of R)`): the
   * 24 bytes after each 48-byte P-384 component and the reserved bytes after S. Empty for what AMD's firmware writes.
   */
  unsignedNonZero: string[];
}

/** The parts of the signature field (0x2A0-0x49F) that carry no signature bytes and that the firmware leaves zero. */
const UNSIGNED_ZERO_RANGES: ReadonlyArray<[from: number, to: number, what: string]> = [
  [0x2a0 + 48, 0x2a0 + 72, 'the padding of R'],
  [0x2e8 + 48, 0x2e8 + 72, 'the padding of S'],
  [0x330, 0x4a0, 'the reserved bytes after the signature'],
];

function unsignedNonZero(bytes: Uint8Array): string[] {
  const hex = (n: number) => `0x${n.toString(16).toUpperCase().padStart(3, '0')}`;
  return UNSIGNED_ZERO_RANGES.filter(([from, to]) => bytes.subarray(from, to).some((b) => b !== 0)).map(
    ([from, to, what]) => `${hex(from)}-${hex(to - 1)} (${what})`,
  );
}

function readTcb(reader: ByteReader, offset: number): SnpTcb {
  const raw = reader.u64(offset);
  const b = reader.slice(offset, 8);
  return { raw, bootloader: b[0]!, tee: b[1]!, snp: b[6]!, microcode: b[7]! };
}

function readPolicy(raw: bigint): SnpPolicy {
  const bit = (n: bigint) => ((raw >> n) & 1n) === 1n;
  return {
    raw,
    abiMinor: Number(raw & 0xffn),
    abiMajor: Number((raw >> 8n) & 0xffn),
    smtAllowed: bit(16n),
    migrateMa: bit(18n),
    debug: bit(SNP_POLICY_DEBUG_BIT),
    singleSocket: bit(20n),
  };
}

function signingKeyOf(flags: number): SnpSigningKey {
  const key = (flags >>> 2) & 0b111;
  if (key === 0) return 'vcek';
  if (key === 1) return 'vlek';
  if (key === 7) return 'none';
  return 'reserved';
}

/** Takes a little-endian, 72-byte zero-padded component and returns the 48-byte big-endian integer. */
function p384Component(le: Uint8Array): Uint8Array {
  const be = Uint8Array.from(le.subarray(0, 48)).reverse();
  return be;
}

/** Parses an SEV-SNP attestation report (configfs-tsm `outblob` on an SNP guest). */
export function readSnpReport(bytes: Uint8Array): SnpReport {
  const reader = new ByteReader(bytes, 'ERR_SNP_REPORT_TRUNCATED', 'SEV-SNP report');
  reader.need(0, SNP_REPORT_SIZE);
  const version = reader.u32(0x00);
  if (!SNP_SUPPORTED_VERSIONS.includes(version)) {
    throw new EvidenceError(
      'ERR_SNP_REPORT_VERSION',
      `SEV-SNP report version ${version} is not supported (expected one of ${SNP_SUPPORTED_VERSIONS.join(', ')})`,
    );
  }
  const flags = reader.u32(0x48);
  const sigOffset = SNP_SIGNED_LENGTH;
  return {
    version,
    guestSvn: reader.u32(0x04),
    policy: readPolicy(reader.u64(0x08)),
    familyId: reader.slice(0x10, 16),
    imageId: reader.slice(0x20, 16),
    vmpl: reader.u32(0x30),
    signatureAlgo: reader.u32(0x34),
    currentTcb: readTcb(reader, 0x38),
    platformInfo: reader.u64(0x40),
    authorKeyEnabled: (flags & 1) === 1,
    maskChipKey: (flags & 2) === 2,
    signingKey: signingKeyOf(flags),
    reportData: reader.slice(0x50, 64),
    measurement: reader.slice(0x90, 48),
    hostData: reader.slice(0xc0, 32),
    idKeyDigest: reader.slice(0xe0, 48),
    authorKeyDigest: reader.slice(0x110, 48),
    reportId: reader.slice(0x140, 32),
    reportIdMa: reader.slice(0x160, 32),
    reportedTcb: readTcb(reader, 0x180),
    chipId: reader.slice(0x1a0, 64),
    committedTcb: readTcb(reader, 0x1e0),
    launchTcb: readTcb(reader, 0x1f0),
    ...(version >= 5 ? { mitigationVectors: { launch: reader.u64(0x1f8), current: reader.u64(0x200) } } : {}),
    signedBytes: reader.slice(0, SNP_SIGNED_LENGTH),
    signature: {
      r: p384Component(reader.slice(sigOffset, SNP_SIGNATURE_COMPONENT_LENGTH)),
      s: p384Component(reader.slice(sigOffset + SNP_SIGNATURE_COMPONENT_LENGTH, SNP_SIGNATURE_COMPONENT_LENGTH)),
    },
    unsignedNonZero: unsignedNonZero(reader.slice(0, SNP_REPORT_SIZE)),
  };
}
