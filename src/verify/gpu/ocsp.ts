/**
 * Revocation of NVIDIA's certificates from recorded OCSP responses (RFC 6960), offline: a bundle of DER responses
 * an auditor fetched from NVIDIA's OCSP service (or `fetchNvidiaCollateral`) is checked the way NVIDIA's local
 * verifier checks live ones. Parsing is @peculiar/asn1-ocsp's; signatures are node:crypto's.
 */
import { createHash, verify as verifySignature, X509Certificate } from 'node:crypto';
import { AsnConvert } from '@peculiar/asn1-schema';
import { BasicOCSPResponse, OCSPResponse, OCSPResponseStatus, id_kp_OCSPSigning, id_pkix_ocsp_basic, type SingleResponse } from '@peculiar/asn1-ocsp';
import { Certificate } from '@peculiar/asn1-x509';
import { fail, notPinned, pass, waive, type Check } from '../check.ts';
import { commonName } from '../evidence/certificate-chain.ts';
import { GpuEvidenceError } from './errors.ts';

/** The CertID hash algorithms a responder may use (RFC 6960 allows any; NVIDIA's uses SHA-384 or SHA-1). */
const CERT_ID_HASHES: Record<string, string> = {
  '1.3.14.3.2.26': 'sha1',
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};

/** Response signature algorithms: ECDSA and RSA PKCS#1 v1.5 with SHA-2, nothing weaker. */
const SIGNATURE_HASHES: Record<string, string> = {
  '1.2.840.10045.4.3.2': 'sha256',
  '1.2.840.10045.4.3.3': 'sha384',
  '1.2.840.10045.4.3.4': 'sha512',
  '1.2.840.113549.1.1.11': 'sha256',
  '1.2.840.113549.1.1.12': 'sha384',
  '1.2.840.113549.1.1.13': 'sha512',
};

/** One recorded response, read: its signed part and who may have signed it. */
export interface RecordedOcspResponse {
  /** Where it came from, for messages (a file name or an index). */
  label: string;
  basic: BasicOCSPResponse;
  signed: Uint8Array;
  certs: X509Certificate[];
}

/** The responses of a bundle that can be read, and why the others cannot. */
export interface OcspBundle {
  responses: RecordedOcspResponse[];
  unreadable: string[];
}

/** Reads a bundle of DER OCSP responses; one that is not a successful basic response is listed as unreadable, not thrown. */
export function readOcspBundle(responses: Array<{ label: string; der: Uint8Array }>): OcspBundle {
  const out: OcspBundle = { responses: [], unreadable: [] };
  for (const { label, der } of responses) {
    try {
      const response = AsnConvert.parse(der, OCSPResponse);
      if (response.responseStatus !== OCSPResponseStatus.successful)
        throw new GpuEvidenceError(
          'ERR_GPU_OCSP_RESPONSE',
          `the responder answered status ${OCSPResponseStatus[response.responseStatus] ?? response.responseStatus}, not successful`,
        );
      if (response.responseBytes?.responseType !== id_pkix_ocsp_basic) throw new GpuEvidenceError('ERR_GPU_OCSP_RESPONSE', 'it is not a basic OCSP response');
      const basic = AsnConvert.parse(response.responseBytes.response.buffer, BasicOCSPResponse);
      if (basic.tbsResponseDataRaw === undefined) throw new GpuEvidenceError('ERR_GPU_OCSP_RESPONSE', 'its signed part cannot be located');
      const certs = (basic.certs ?? []).map((c) => new X509Certificate(Buffer.from(AsnConvert.serialize(c))));
      out.responses.push({ label, basic, signed: new Uint8Array(basic.tbsResponseDataRaw), certs });
    } catch (err) {
      out.unreadable.push(`${label}: ${(err as Error).message}`);
    }
  }
  return out;
}

const digest = (algorithm: string, bytes: Uint8Array) => createHash(algorithm).update(bytes).digest();

/** Whether `single` names `cert` as issued by `issuer`: serial, issuer name hash and issuer key hash. */
function covers(single: SingleResponse, cert: X509Certificate, issuer: X509Certificate): boolean {
  const hash = CERT_ID_HASHES[single.certID.hashAlgorithm.algorithm];
  if (hash === undefined) return false;
  const issuerTbs = AsnConvert.parse(issuer.raw, Certificate).tbsCertificate;
  const nameHash = digest(hash, new Uint8Array(AsnConvert.serialize(issuerTbs.subject)));
  const keyHash = digest(hash, new Uint8Array(issuerTbs.subjectPublicKeyInfo.subjectPublicKey));
  const serial = Buffer.from(single.certID.serialNumber)
    .toString('hex')
    .replace(/^(00)+(?=.)/, '');
  return (
    serial.toUpperCase() === cert.serialNumber.replace(/^(00)+(?=.)/, '').toUpperCase() &&
    nameHash.equals(Buffer.from(single.certID.issuerNameHash.buffer)) &&
    keyHash.equals(Buffer.from(single.certID.issuerKeyHash.buffer))
  );
}

/** Who signed the response: the issuer itself, or a certificate the issuer made for OCSP signing (RFC 6960, 4.2.2.2); null when neither did. */
function responseSigner(response: RecordedOcspResponse, issuer: X509Certificate, at: Date): string | null {
  const hash = SIGNATURE_HASHES[response.basic.signatureAlgorithm.algorithm];
  if (hash === undefined) return null;
  const signature = Buffer.from(response.basic.signature);
  const signedBy = (key: X509Certificate) => {
    try {
      return verifySignature(hash, response.signed, key.publicKey, signature);
    } catch {
      return false;
    }
  };
  if (signedBy(issuer)) return commonName(issuer);
  for (const delegate of response.certs) {
    const valid = new Date(delegate.validFrom) <= at && at <= new Date(delegate.validTo);
    const forOcsp = (delegate.keyUsage ?? []).includes(id_kp_OCSPSigning);
    if (valid && forOcsp && delegate.checkIssued(issuer) && delegate.verify(issuer.publicKey) && signedBy(delegate))
      return `${commonName(delegate)} (delegated by ${commonName(issuer)})`;
  }
  return null;
}

type Status = { state: 'good'; detail: string } | { state: 'bad' | 'missing'; detail: string };

/** What the bundle says of `cert` at `at`: good, revoked (or otherwise unusable), or nothing at all. */
function certificateStatus(cert: X509Certificate, issuer: X509Certificate, bundle: OcspBundle, at: Date): Status {
  const name = commonName(cert);
  let problem: string | undefined;
  for (const response of bundle.responses) {
    for (const single of response.basic.tbsResponseData.responses) {
      if (!covers(single, cert, issuer)) continue;
      const signer = responseSigner(response, issuer, at);
      if (signer === null) {
        problem ??= `the response ${response.label} about ${name} is not signed by its issuer ${commonName(issuer)} nor by an OCSP signer it certified`;
        continue;
      }
      if (single.certStatus.revoked !== undefined) {
        const { revocationTime, revocationReason } = single.certStatus.revoked;
        return {
          state: 'bad',
          detail: `${name} was revoked at ${revocationTime.toISOString()}${revocationReason === undefined ? '' : ` (reason ${revocationReason})`}, says ${signer} (${response.label})`,
        };
      }
      if (single.thisUpdate > at) {
        problem ??= `the response ${response.label} about ${name} was made at ${single.thisUpdate.toISOString()}, after the verification time ${at.toISOString()}`;
        continue;
      }
      if (single.nextUpdate === undefined || single.nextUpdate < at) {
        problem ??= `the response ${response.label} about ${name} ${single.nextUpdate === undefined ? 'states no nextUpdate, so nothing says how long it holds' : `expired at ${single.nextUpdate.toISOString()}`} (verification time ${at.toISOString()})`;
        continue;
      }
      if (single.certStatus.unknown !== undefined) {
        problem ??= `the responder does not know ${name} (status unknown, ${response.label})`;
        continue;
      }
      return { state: 'good', detail: `${name}: good from ${single.thisUpdate.toISOString()} to ${single.nextUpdate.toISOString()}, signed by ${signer}` };
    }
  }
  return problem === undefined ? { state: 'missing', detail: `no recorded OCSP response covers ${name}` } : { state: 'bad', detail: problem };
}

export interface OcspCheckOptions {
  /** The recorded responses; absent, revocation is reported as not pinned (nothing was looked up). */
  bundle?: OcspBundle;
  /** The auditor's waiver of missing responses (reference value `gpu.ocsp_allow_missing`): a missing one is waived, not failed. */
  allowMissing?: boolean;
  at: Date;
}

/**
 * Whether any certificate of `chain` (leaf first, each issued by the next; the root itself is never asked about) is
 * revoked, by the recorded responses. A GPU's device chain is given without the GPU's own certificate. Fails closed: a revoked, expired, unsigned or unknown answer fails, and so does
 * a certificate no response covers, unless the auditor waived missing responses.
 */
export function revocationCheck(name: string, what: string, chain: X509Certificate[], options: OcspCheckOptions): Check {
  if (options.bundle === undefined)
    return notPinned(
      name,
      `not checked: no recorded OCSP responses were given for the ${what} (reference values gpu.ocsp), so a revoked certificate would go unnoticed`,
    );
  if (chain.length < 2) {
    const none = fail(name, `not checked: the ${what} has no certificate below its root that NVIDIA's OCSP responder answers for`);
    return options.allowMissing === true
      ? waive(none, 'the reference values allow certificates without a recorded OCSP response (gpu.ocsp_allow_missing)')
      : none;
  }
  const statuses = chain.slice(0, -1).map((cert, i) => certificateStatus(cert, chain[i + 1]!, options.bundle!, options.at));
  const bad = statuses.filter((s) => s.state === 'bad');
  if (bad.length > 0) return fail(name, `the ${what} cannot be trusted: ${bad.map((s) => s.detail).join('; ')}`);
  const missing = statuses.filter((s) => s.state === 'missing');
  const good = statuses.filter((s) => s.state === 'good').map((s) => s.detail);
  if (missing.length > 0) {
    const check = fail(
      name,
      `not checked: ${missing.map((s) => s.detail).join('; ')}${options.bundle.unreadable.length > 0 ? ` (unreadable: ${options.bundle.unreadable.join('; ')})` : ''}`,
    );
    return options.allowMissing === true
      ? waive(check, 'the reference values allow certificates without a recorded OCSP response (gpu.ocsp_allow_missing)')
      : check;
  }
  return pass(name, `no certificate of the ${what} is revoked, by NVIDIA's recorded OCSP responses: ${good.join('; ')}`);
}
