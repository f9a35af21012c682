import { generateKeyPairSync } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { collateralExpiry } from '../../../src/client/collateral-expiry.ts';
import type { ServiceEvidence } from '../../../src/verify/verify-service.ts';
import { amdTestCrl, createAmdTestChain, type AmdTestChain } from '../../support/evidence-fixtures.ts';
import { ocspResponse } from '../../support/ocsp-fixtures.ts';

/** When a verdict must be renewed because collateral it used expires (src/client/collateral-expiry.ts). */
const AT = new Date('2026-03-01T12:00:00Z');
let chain: AmdTestChain;
beforeAll(async () => {
  chain = await createAmdTestChain('Milan');
});

const crlUntil = async (nextUpdate: Date) =>
  new Uint8Array((await amdTestCrl(chain, [], { thisUpdate: new Date('2026-03-01T00:00:00Z'), nextUpdate })).rawData);
const signed = (field: 'tcbInfo' | 'enclaveIdentity', nextUpdate: string) => JSON.stringify({ [field]: { nextUpdate }, signature: '00' });
const ocspUntil = (nextUpdate: Date) => ({
  label: 'gpu.ocsp',
  der: ocspResponse({
    cert: new Uint8Array(chain.ask.rawData),
    issuer: new Uint8Array(chain.ark.rawData),
    thisUpdate: new Date('2026-03-01T00:00:00Z'),
    nextUpdate,
    signer: generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey,
  }),
});
const evidence = (collateral: ServiceEvidence['collateral'], ocsp: ServiceEvidence['ocsp'] = []): ServiceEvidence =>
  ({ attestation: {}, jwks: { keys: [] }, policy: {}, ocsp, ...(collateral === undefined ? {} : { collateral }) }) as ServiceEvidence;

describe('collateralExpiry', () => {
  it('is the earliest nextUpdate of the AMD CRL, the Intel CRLs, TCB info and QE identity, and the OCSP answers', async () => {
    const collateral = {
      amd: { crl: await crlUntil(new Date('2026-03-08T00:00:00Z')) },
      intel: {
        pckCrl: await crlUntil(new Date('2026-03-05T00:00:00Z')),
        rootCrl: await crlUntil(new Date('2026-04-01T00:00:00Z')),
        tcbInfo: signed('tcbInfo', '2026-03-04T00:00:00Z'),
        qeIdentity: signed('enclaveIdentity', '2026-03-03T00:00:00Z'),
      },
    };
    expect(collateralExpiry(evidence(collateral), AT)).toEqual(new Date('2026-03-03T00:00:00Z'));
    expect(collateralExpiry(evidence(collateral, [ocspUntil(new Date('2026-03-01T18:00:00Z'))]), AT)).toEqual(new Date('2026-03-01T18:00:00Z'));
  });

  it('leaves out dates already past (the check that used them judged them) and says nothing without collateral', async () => {
    const collateral = { amd: { crl: await crlUntil(new Date('2026-03-01T06:00:00Z')) }, intel: { tcbInfo: signed('tcbInfo', '2026-03-02T00:00:00Z') } };
    expect(collateralExpiry(evidence(collateral), AT)).toEqual(new Date('2026-03-02T00:00:00Z'));
    expect(collateralExpiry(evidence({ amd: { crl: await crlUntil(new Date('2026-03-01T06:00:00Z')) }, intel: {} }), AT)).toBeUndefined();
    expect(collateralExpiry(evidence(undefined), AT)).toBeUndefined();
  });

  it('ignores collateral it cannot read: its own check fails by name', () => {
    const collateral = { amd: { crl: new Uint8Array([1, 2, 3]) }, intel: { tcbInfo: 'not json', qeIdentity: signed('enclaveIdentity', 'never') } };
    expect(collateralExpiry(evidence(collateral), AT)).toBeUndefined();
  });
});
