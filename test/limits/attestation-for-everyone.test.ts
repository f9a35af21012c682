import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { get } from 'node:http';
import { createAttestedFetch } from '../../src/client/index.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** docs/api.md, "Fresh attestation": an anonymous flood cannot keep attested clients from attesting. */
let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
});

afterAll(async () => {
  await sigil.close(0);
  await engine.close();
});

const freshNonce = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex');

describe('fresh attestation under an anonymous flood', () => {
  it('an anonymous loop at 50 requests/s from another address while ten attested clients start: all ten attest, the flood is limited on its own', async () => {
    const port = new URL(sigil.url).port;
    // The flooder: another loopback address, as another machine would be.
    const statuses: number[] = [];
    let flooding = true;
    const flood = (async () => {
      while (flooding) {
        const tick = Date.now();
        get({ host: '127.0.0.1', port, localAddress: '127.0.0.2', path: `/v1/verify/attestation?nonce=${freshNonce()}` }, (res) => {
          statuses.push(res.statusCode ?? 0);
          res.resume();
        }).on('error', () => statuses.push(0));
        await new Promise((r) => setTimeout(r, Math.max(0, 20 - (Date.now() - tick))));
      }
    })();
    try {
      // Let the flood drain any shared allowance first.
      await new Promise((r) => setTimeout(r, 1500));
      const results = await Promise.allSettled(Array.from({ length: 10 }, () => createAttestedFetch({ baseURL: `${sigil.url}/v1`, allowNoTee: true })));
      const failures = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
      expect(failures).toEqual([]);
      for (const r of results) if (r.status === 'fulfilled') await r.value.close();
    } finally {
      flooding = false;
      await flood;
      await new Promise((r) => setTimeout(r, 200));
    }
    // The flood itself was limited: its own allowance, then 429.
    expect(statuses.length).toBeGreaterThan(50);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(20);
  });
});
