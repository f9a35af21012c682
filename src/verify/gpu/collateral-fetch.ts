/**
 * Fetches what an offline GPU verification needs from NVIDIA: RIMs by id from the RIM service, and OCSP answers for
 * the device and RIM signing chains. Nothing fetched is trusted here: the RIMs' signatures and the OCSP responses'
 * signatures are checked when the bundle is verified (verifyRim, readOcspBundle/revocationCheck).
 */
import { createHash, X509Certificate } from 'node:crypto';
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import { AlgorithmIdentifier, Certificate } from '@peculiar/asn1-x509';
import { CertID, OCSPRequest, Request, TBSRequest } from '@peculiar/asn1-ocsp';
import { CollateralAnswerError, CollateralFetchError } from '../evidence/collateral/fetch-error.ts';
import { boundedFetch, DEFAULT_MAX_FILE_BYTES, fetchLimits, type BoundedResponse, type FetchLimits } from '../evidence/collateral/bounded-fetch.ts';
import type { SpdmMeasurementReport } from './spdm-measurements.ts';

export { CollateralAnswerError, CollateralFetchError };

export const NVIDIA_RIM_SERVICE = 'https://rim.attestation.nvidia.com';
export const NVIDIA_OCSP_SERVICE = 'https://ocsp.ndis.nvidia.com';

export interface NvidiaCollateralOptions {
  /** The RIM service's base URL; RIMs are read from `<base>/v1/rim/<id>`. Default NVIDIA's. */
  rimServiceUrl?: string;
  /** The OCSP responder's URL (RFC 6960 POST). Default NVIDIA's. */
  ocspUrl?: string;
  /** Per request; default 10 s. */
  timeoutMs?: number;
  /** Default the global fetch. */
  fetch?: typeof fetch;
  /** A whole collateral fetch's byte cap per file and deadline (instead of `timeoutMs` for each request). */
  limits?: FetchLimits;
}

export interface NvidiaCollateralRequest {
  /** RIM ids, e.g. from `rimIdsForReport`. */
  rimIds: string[];
  /**
   * Certificate chains (leaf first, root last) whose certificates below the root need an OCSP answer; a certificate
   * two chains share is asked about once. A GPU's device chain is given without its first certificate, which the
   * GPU's firmware issues itself and NVIDIA's responder does not know (docs/auditing.md, section 3).
   */
  chains: X509Certificate[][];
}

export interface NvidiaCollateral {
  /** Each RIM as the service answered it (JSON `{id, rim, sha256}`), which the verifier reads as is. */
  rims: Array<{ id: string; text: string }>;
  /** One DER OCSP response per certificate asked about, labelled with its subject and serial. */
  ocsp: Array<{ label: string; der: Uint8Array }>;
}

/** The ids NVIDIA's RIM service gives the driver and VBIOS RIMs of this report's firmware (as NVIDIA's verifier names them). */
export function rimIdsForReport(report: SpdmMeasurementReport): string[] {
  const f = report.firmware;
  const ids: string[] = [];
  if (f.driverVersion !== null) ids.push(`NV_GPU_DRIVER_GH100_${f.driverVersion}`);
  if (f.vbiosVersion !== null && f.project !== null && f.projectSku !== null && f.chipSku !== null) {
    ids.push(`NV_GPU_VBIOS_${f.project}_${f.projectSku}_${f.chipSku}_${f.vbiosVersion.replace(/\./g, '')}`.toUpperCase());
  }
  return ids;
}

const SHA384_OID = '2.16.840.1.101.3.4.2.2';

/** An RFC 6960 request for one certificate, CertID by SHA-384 as NVIDIA's verifier asks. */
export function ocspRequestFor(cert: X509Certificate, issuer: X509Certificate): Uint8Array<ArrayBuffer> {
  const issuerTbs = AsnConvert.parse(issuer.raw, Certificate).tbsCertificate;
  const h = (bytes: ArrayBuffer) => createHash('sha384').update(new Uint8Array(bytes)).digest();
  const reqCert = new CertID({
    hashAlgorithm: new AlgorithmIdentifier({ algorithm: SHA384_OID, parameters: null }),
    issuerNameHash: new OctetString(h(AsnConvert.serialize(issuerTbs.subject))),
    issuerKeyHash: new OctetString(h(issuerTbs.subjectPublicKeyInfo.subjectPublicKey)),
    serialNumber: AsnConvert.parse(cert.raw, Certificate).tbsCertificate.serialNumber,
  });
  return new Uint8Array(AsnConvert.serialize(new OCSPRequest({ tbsRequest: new TBSRequest({ requestList: [new Request({ reqCert })] }) })));
}

/** One request under the caller's limits, or alone under `timeoutMs` and the default cap per file. */
function call(what: string, url: string, init: RequestInit, o: NvidiaCollateralOptions): Promise<BoundedResponse> {
  const limits = o.limits ?? fetchLimits(DEFAULT_MAX_FILE_BYTES, (o.timeoutMs ?? 10_000) / 1000);
  return boundedFetch(what, url, init, limits, o.fetch);
}

/**
 * Fetches the RIMs `request.rimIds` names and an OCSP answer for every certificate below the root of each chain.
 * Rejects with CollateralFetchError (no answer) or CollateralAnswerError (not the file asked for) naming the first
 * that cannot be had; what is fetched is verified later.
 */
export async function fetchNvidiaCollateral(request: NvidiaCollateralRequest, options: NvidiaCollateralOptions = {}): Promise<NvidiaCollateral> {
  const rimBase = (options.rimServiceUrl ?? NVIDIA_RIM_SERVICE).replace(/\/+$/, '');
  const ocspUrl = options.ocspUrl ?? NVIDIA_OCSP_SERVICE;
  const rims = await Promise.all(
    request.rimIds.map(async (id) => {
      const url = `${rimBase}/v1/rim/${encodeURIComponent(id)}`;
      const text = Buffer.from((await call(`RIM ${id}`, url, { headers: { accept: 'application/json' } }, options)).body).toString('utf8');
      let answer: { id?: unknown; rim?: unknown };
      try {
        answer = JSON.parse(text) as typeof answer;
      } catch {
        throw new CollateralAnswerError(`RIM ${id}: ${url} did not answer JSON`);
      }
      if (answer.id !== id || typeof answer.rim !== 'string')
        throw new CollateralAnswerError(`RIM ${id}: ${url} answered ${typeof answer.id === 'string' ? `RIM ${answer.id}` : 'no RIM id'}, not ${id}`);
      return { id, text };
    }),
  );
  const seen = new Set<string>();
  const asked = request.chains
    .flatMap((chain) => chain.slice(0, -1).map((cert, i) => ({ cert, issuer: chain[i + 1]! })))
    .filter(({ cert, issuer }) => {
      const key = `${cert.fingerprint256}/${issuer.fingerprint256}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  const ocsp = await Promise.all(
    asked.map(async ({ cert, issuer }) => {
      const label = `${cert.subject.replace(/\n/g, ', ')} serial ${cert.serialNumber}`;
      const res = await call(
        `OCSP for ${label}`,
        ocspUrl,
        { method: 'POST', headers: { 'content-type': 'application/ocsp-request', accept: 'application/ocsp-response' }, body: ocspRequestFor(cert, issuer) },
        options,
      );
      const type = res.headers.get('content-type') ?? '';
      if (!type.startsWith('application/ocsp-response')) {
        throw new CollateralAnswerError(`OCSP for ${label}: ${ocspUrl} answered ${type || 'no content type'}, not application/ocsp-response`);
      }
      return { label, der: res.body };
    }),
  );
  return { rims, ocsp };
}
