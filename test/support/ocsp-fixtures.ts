/** OCSP responses made and signed in the tests (RFC 6960), since no recorded NVIDIA response is public (test/vectors/README.md). */
import { createHash, sign, type KeyObject } from 'node:crypto';
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import { AlgorithmIdentifier, Certificate } from '@peculiar/asn1-x509';
import {
  BasicOCSPResponse,
  CertID,
  CertStatus,
  OCSPResponse,
  OCSPResponseStatus,
  ResponderID,
  ResponseBytes,
  ResponseData,
  RevokedInfo,
  SingleResponse,
  id_pkix_ocsp_basic,
} from '@peculiar/asn1-ocsp';

/** The verification time the responses are current at by default. */
export const AT = new Date('2030-01-01T00:00:00Z');
export const HOUR = 3600_000;

export interface ResponseSpec {
  /** The certificate asked about and its issuer, both DER. */
  cert: Uint8Array;
  issuer: Uint8Array;
  status?: 'good' | 'revoked' | 'unknown';
  thisUpdate?: Date;
  nextUpdate?: Date | null;
  signer: KeyObject;
  /** A delegated responder's certificate, sent in the response. */
  signerCert?: Uint8Array;
  hash?: 'sha1' | 'sha384';
}

const HASH_OIDS = { sha1: '1.3.14.3.2.26', sha384: '2.16.840.1.101.3.4.2.2' };

/** A DER OCSP response as a responder makes one (RFC 6960), signed ECDSA-SHA384. */
export function ocspResponse(spec: ResponseSpec): Uint8Array {
  const hash = spec.hash ?? 'sha384';
  const issuerTbs = AsnConvert.parse(spec.issuer, Certificate).tbsCertificate;
  const serial = AsnConvert.parse(spec.cert, Certificate).tbsCertificate.serialNumber;
  const h = (bytes: ArrayBuffer) => createHash(hash).update(new Uint8Array(bytes)).digest();
  const certID = new CertID({
    hashAlgorithm: new AlgorithmIdentifier({ algorithm: HASH_OIDS[hash], parameters: null }),
    issuerNameHash: new OctetString(h(AsnConvert.serialize(issuerTbs.subject))),
    issuerKeyHash: new OctetString(h(issuerTbs.subjectPublicKeyInfo.subjectPublicKey)),
    serialNumber: serial,
  });
  const status = spec.status ?? 'good';
  const certStatus =
    status === 'good'
      ? new CertStatus({ good: null })
      : status === 'revoked'
        ? new CertStatus({ revoked: new RevokedInfo({ revocationTime: new Date('2029-06-01T00:00:00Z') }) })
        : new CertStatus({ unknown: null });
  const thisUpdate = spec.thisUpdate ?? new Date(AT.getTime() - HOUR);
  const nextUpdate = spec.nextUpdate === undefined ? new Date(AT.getTime() + 24 * HOUR) : spec.nextUpdate;
  const single = new SingleResponse({ certID, certStatus, thisUpdate, ...(nextUpdate === null ? {} : { nextUpdate }) });
  const tbs = new ResponseData({
    responderID: new ResponderID({ byKey: new OctetString(createHash('sha1').update('responder').digest()) }),
    producedAt: thisUpdate,
    responses: [single],
  });
  const signature = sign('sha384', Buffer.from(AsnConvert.serialize(tbs)), spec.signer);
  const basic = new BasicOCSPResponse({
    tbsResponseData: tbs,
    signatureAlgorithm: new AlgorithmIdentifier({ algorithm: '1.2.840.10045.4.3.3' }),
    signature: new Uint8Array(signature).buffer,
    ...(spec.signerCert === undefined ? {} : { certs: [AsnConvert.parse(spec.signerCert, Certificate)] }),
  });
  const response = new OCSPResponse({
    responseStatus: OCSPResponseStatus.successful,
    responseBytes: new ResponseBytes({ responseType: id_pkix_ocsp_basic, response: new OctetString(AsnConvert.serialize(basic)) }),
  });
  return new Uint8Array(AsnConvert.serialize(response));
}
