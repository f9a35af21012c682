import { ByteReader } from './byte-reader.ts';
import { EvidenceError } from './errors.ts';

/**
 * Intel TDX DCAP quotes v4 and v5 (Intel TDX DCAP Quoting Library API, appendix "Quote Format"). v5 puts a body
 * descriptor (type u16, size u32) between the header and the body, and its type 3 body is the TDX 1.5 TD report.
 */
export const TDX_QUOTE_VERSIONS: readonly number[] = [4, 5];
export const TDX_ATTESTATION_KEY_ECDSA_P256 = 2;
export const TDX_TEE_TYPE = 0x81;
export const TDX_HEADER_SIZE = 48;
export const TDX_BODY_SIZE = 584;
/** The TDX 1.5 TD report body: the 1.0 body followed by TEE_TCB_SVN2 (16) and MRSERVICETD (48). */
export const TDX_BODY_15_SIZE = TDX_BODY_SIZE + 64;
/** v5 body descriptor: type 2 is a TD report 1.0, type 3 a TD report 1.5 (type 1, an SGX report, is not TDX). */
export const TDX_V5_BODY_TYPES: Readonly<Record<number, number>> = { 2: TDX_BODY_SIZE, 3: TDX_BODY_15_SIZE };
const TDX_V5_DESCRIPTOR_SIZE = 6;
export const TDX_QE_REPORT_SIZE = 384;
export const TDX_CERT_DATA_PCK_CHAIN = 5;
export const TDX_CERT_DATA_QE_REPORT = 6;
/** TDATTRIBUTES bit 0 (TUD.DEBUG): the TD runs in debug mode and the host can read its memory. */
export const TDX_TD_ATTRIBUTES_DEBUG_BIT = 0;

export interface TdxQuoteHeader {
  version: number;
  attestationKeyType: number;
  teeType: number;
  qeSvn: number;
  pceSvn: number;
  qeVendorId: Uint8Array;
  userData: Uint8Array;
}

export interface TdxReportBody {
  teeTcbSvn: Uint8Array;
  mrSeam: Uint8Array;
  mrSignerSeam: Uint8Array;
  seamAttributes: Uint8Array;
  tdAttributes: Uint8Array;
  xfam: Uint8Array;
  mrTd: Uint8Array;
  mrConfigId: Uint8Array;
  mrOwner: Uint8Array;
  mrOwnerConfig: Uint8Array;
  rtmr: [Uint8Array, Uint8Array, Uint8Array, Uint8Array];
  reportData: Uint8Array;
  /** TD report 1.5 only: the SVN of the TDX module that was running before the current one (TD preserving update). */
  teeTcbSvn2?: Uint8Array;
  /** TD report 1.5 only: the measurement of the service TD bound to this TD (zero when none). */
  mrServiceTd?: Uint8Array;
}

/** The SGX report of the Quoting Enclave (384-byte SGX REPORT BODY). */
export interface TdxQeReport {
  raw: Uint8Array;
  cpuSvn: Uint8Array;
  miscSelect: number;
  attributes: Uint8Array;
  mrEnclave: Uint8Array;
  mrSigner: Uint8Array;
  isvProdId: number;
  isvSvn: number;
  reportData: Uint8Array;
}

export interface TdxQuote {
  header: TdxQuoteHeader;
  /** v4: 2 (TD report 1.0, implied); v5: the body descriptor's type, 2 or 3 (TD report 1.5). */
  bodyType: number;
  body: TdxReportBody;
  /** Header, v5 body descriptor and body bytes, what `signature` covers. */
  signedBytes: Uint8Array;
  /** ECDSA P-256 r||s (32 bytes each, big-endian). */
  signature: Uint8Array;
  /** Raw P-256 public key x||y (64 bytes). */
  attestationKey: Uint8Array;
  qeReport: TdxQeReport;
  /** ECDSA P-256 r||s by the PCK key over `qeReport.raw`. */
  qeReportSignature: Uint8Array;
  qeAuthData: Uint8Array;
  /** PEM text of the PCK certificate chain: PCK leaf, intermediate CA, root CA. */
  pckChainPem: string;
}

function readBody(r: ByteReader, at: number, bodyType: number): TdxReportBody {
  let o = at;
  const take = (n: number) => {
    const bytes = r.slice(o, n);
    o += n;
    return bytes;
  };
  const teeTcbSvn = take(16);
  const mrSeam = take(48);
  const mrSignerSeam = take(48);
  const seamAttributes = take(8);
  const tdAttributes = take(8);
  const xfam = take(8);
  const mrTd = take(48);
  const mrConfigId = take(48);
  const mrOwner = take(48);
  const mrOwnerConfig = take(48);
  const rtmr: TdxReportBody['rtmr'] = [take(48), take(48), take(48), take(48)];
  const reportData = take(64);
  const body: TdxReportBody = {
    teeTcbSvn,
    mrSeam,
    mrSignerSeam,
    seamAttributes,
    tdAttributes,
    xfam,
    mrTd,
    mrConfigId,
    mrOwner,
    mrOwnerConfig,
    rtmr,
    reportData,
  };
  if (bodyType === 3) {
    body.teeTcbSvn2 = take(16);
    body.mrServiceTd = take(48);
  }
  return body;
}

function readQeReport(r: ByteReader, at: number): TdxQeReport {
  return {
    raw: r.slice(at, TDX_QE_REPORT_SIZE),
    cpuSvn: r.slice(at, 16),
    miscSelect: r.u32(at + 16),
    attributes: r.slice(at + 48, 16),
    mrEnclave: r.slice(at + 64, 32),
    mrSigner: r.slice(at + 128, 32),
    isvProdId: r.u16(at + 256),
    isvSvn: r.u16(at + 258),
    reportData: r.slice(at + 320, 64),
  };
}

/** Parses a TDX quote v4 or v5 (configfs-tsm `outblob` on a TDX guest). Bytes after the signature data are ignored. */
export function readTdxQuote(bytes: Uint8Array): TdxQuote {
  const r = new ByteReader(bytes, 'ERR_TDX_QUOTE_TRUNCATED', 'TDX quote');
  r.need(0, TDX_HEADER_SIZE);
  const header: TdxQuoteHeader = {
    version: r.u16(0),
    attestationKeyType: r.u16(2),
    teeType: r.u32(4),
    qeSvn: r.u16(8),
    pceSvn: r.u16(10),
    qeVendorId: r.slice(12, 16),
    userData: r.slice(28, 20),
  };
  if (!TDX_QUOTE_VERSIONS.includes(header.version)) {
    throw new EvidenceError('ERR_TDX_QUOTE_VERSION', `TDX quote version ${header.version} is not supported (expected 4 or 5)`);
  }
  if (header.attestationKeyType !== TDX_ATTESTATION_KEY_ECDSA_P256) {
    throw new EvidenceError(
      'ERR_TDX_QUOTE_UNSUPPORTED',
      `TDX quote attestation key type ${header.attestationKeyType} is not supported (expected 2, ECDSA-256-with-P-256)`,
    );
  }
  if (header.teeType !== TDX_TEE_TYPE) {
    throw new EvidenceError('ERR_TDX_QUOTE_UNSUPPORTED', `quote TEE type 0x${header.teeType.toString(16)} is not TDX (0x81)`);
  }
  let bodyType = 2;
  let bodyAt = TDX_HEADER_SIZE;
  if (header.version === 5) {
    bodyType = r.u16(TDX_HEADER_SIZE);
    const bodySize = r.u32(TDX_HEADER_SIZE + 2);
    const expected = TDX_V5_BODY_TYPES[bodyType];
    if (expected === undefined) {
      throw new EvidenceError(
        'ERR_TDX_QUOTE_UNSUPPORTED',
        `TDX quote v5 body type ${bodyType} is not supported (expected 2, a TD report 1.0, or 3, a TD report 1.5)`,
      );
    }
    if (bodySize !== expected) {
      throw new EvidenceError('ERR_TDX_QUOTE_UNSUPPORTED', `TDX quote v5 body type ${bodyType} declares ${bodySize} bytes (expected ${expected})`);
    }
    bodyAt += TDX_V5_DESCRIPTOR_SIZE;
  }
  const signedLength = bodyAt + (bodyType === 3 ? TDX_BODY_15_SIZE : TDX_BODY_SIZE);
  r.need(0, signedLength + 4);
  const body = readBody(r, bodyAt, bodyType);

  const sigDataLength = r.u32(signedLength);
  const sigStart = signedLength + 4;
  r.need(sigStart, sigDataLength);
  // Inside the signature data every read must also stay inside its declared length.
  const sig = new ByteReader(r.bytes.subarray(sigStart, sigStart + sigDataLength), 'ERR_TDX_QUOTE_TRUNCATED', 'TDX quote signature data');
  const signature = sig.slice(0, 64);
  const attestationKey = sig.slice(64, 64);
  const outerType = sig.u16(128);
  const outerSize = sig.u32(130);
  if (outerType !== TDX_CERT_DATA_QE_REPORT) {
    throw new EvidenceError(
      'ERR_TDX_QUOTE_UNSUPPORTED',
      `TDX quote certification data type ${outerType} is not supported (expected 6, QE report certification data)`,
    );
  }
  sig.need(134, outerSize);
  const qe = new ByteReader(sig.bytes.subarray(134, 134 + outerSize), 'ERR_TDX_QUOTE_TRUNCATED', 'TDX QE report certification data');
  const qeReport = readQeReport(qe, 0);
  const qeReportSignature = qe.slice(TDX_QE_REPORT_SIZE, 64);
  const authLength = qe.u16(TDX_QE_REPORT_SIZE + 64);
  const qeAuthData = qe.slice(TDX_QE_REPORT_SIZE + 66, authLength);
  const innerAt = TDX_QE_REPORT_SIZE + 66 + authLength;
  const innerType = qe.u16(innerAt);
  const innerSize = qe.u32(innerAt + 2);
  if (innerType !== TDX_CERT_DATA_PCK_CHAIN) {
    throw new EvidenceError('ERR_TDX_QUOTE_UNSUPPORTED', `TDX QE certification data type ${innerType} is not supported (expected 5, PCK certificate chain)`);
  }
  const chainBytes = qe.slice(innerAt + 6, innerSize);
  // The chain is PEM text, often followed by NUL padding.
  const pckChainPem = Buffer.from(chainBytes).toString('latin1').replace(/\0+$/, '');

  return {
    header,
    bodyType,
    body,
    signedBytes: r.slice(0, signedLength),
    signature,
    attestationKey,
    qeReport,
    qeReportSignature,
    qeAuthData,
    pckChainPem,
  };
}
