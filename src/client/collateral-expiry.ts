import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { readOcspBundle } from '../verify/gpu/ocsp.ts';
import type { ServiceEvidence } from '../verify/verify-service.ts';

/** A CRL's nextUpdate (DER or PEM); undefined when it cannot be read (its check says why) or states none. */
function crlNextUpdate(bytes: Uint8Array): Date | undefined {
  try {
    const text = Buffer.from(bytes).toString('latin1');
    return new x509.X509Crl(text.includes('-----BEGIN') ? text : Uint8Array.from(bytes)).nextUpdate;
  } catch {
    return undefined;
  }
}

/** `nextUpdate` of Intel's signed TCB info or QE identity (`{"tcbInfo": {...}}` or `{"enclaveIdentity": {...}}`). */
function signedBodyNextUpdate(json: string, field: 'tcbInfo' | 'enclaveIdentity'): Date | undefined {
  try {
    const next = (JSON.parse(json) as Record<string, { nextUpdate?: unknown } | undefined>)[field]?.nextUpdate;
    const date = typeof next === 'string' ? new Date(next) : undefined;
    return date === undefined || Number.isNaN(date.getTime()) ? undefined : date;
  } catch {
    return undefined;
  }
}

/**
 * The earliest `nextUpdate` among the collateral a verdict was reached with (AMD's and Intel's CRLs, Intel's TCB info and
 * QE identity, the recorded OCSP answers for the GPU certificates): the verdict is renewed before then, so a revocation or a
 * TCB recovery published at that update is seen. Dates already past at `at` are left out: the check that used them judged them.
 */
export function collateralExpiry(evidence: ServiceEvidence, at: Date): Date | undefined {
  const dates: Array<Date | undefined> = [];
  const { amd, intel, nvidia } = evidence.collateral ?? {};
  if (amd?.crl !== undefined) dates.push(crlNextUpdate(amd.crl));
  if (intel?.pckCrl !== undefined) dates.push(crlNextUpdate(intel.pckCrl));
  if (intel?.rootCrl !== undefined) dates.push(crlNextUpdate(intel.rootCrl));
  if (intel?.tcbInfo !== undefined) dates.push(signedBodyNextUpdate(intel.tcbInfo, 'tcbInfo'));
  if (intel?.qeIdentity !== undefined) dates.push(signedBodyNextUpdate(intel.qeIdentity, 'enclaveIdentity'));
  for (const response of readOcspBundle([...(evidence.ocsp ?? []), ...(nvidia?.ocsp ?? [])]).responses)
    for (const single of response.basic.tbsResponseData.responses) dates.push(single.nextUpdate);
  const ahead = dates.filter((d): d is Date => d !== undefined && d > at);
  return ahead.length === 0 ? undefined : new Date(Math.min(...ahead.map((d) => d.getTime())));
}
