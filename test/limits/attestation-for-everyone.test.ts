import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { get } from 'node:http';
import { createAttestedFetch } from '../../src/client/index.ts';
import { checkMark } from '../../src/verify/check.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** docs/attestation.md, "Freshness from a signed nonce": an anonymous flood cannot keep attested clients from attesting. */
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

const until = async (done: () => boolean) => {
  while (!done()) await new Promise((r) => setTimeout(r, 20));
};

const freshNonce = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex');

describe('fresh attestation under an anonymous flood', () => {
  it("an anonymous loop at 50 requests/s from the attested clients' own address (as behind a load balancer) while ten attested clients start: all ten attest, the flood is limited", async () => {
    const port = new URL(sigil.url).port;
    // The flooder shares 127.0.0.1 with the attested clients, as every client does behind a load balancer.
    // It asks for hardware reports and signed nonces in turn, 50 requests a second in all.
    const statuses = { report: [] as number[], signature: [] as number[] };
    let flooding = true;
    let sent = 0;
    const floodStarted = performance.now();
    const flood = (async () => {
      while (flooding) {
        const tick = Date.now();
        const route = sent++ % 2 === 0 ? 'report' : 'signature';
        get({ host: '127.0.0.1', port, localAddress: '127.0.0.1', path: `/v1/verify/attestation?nonce=${freshNonce()}&proof=${route}` }, (res) => {
          statuses[route].push(res.statusCode ?? 0);
          res.resume();
        }).on('error', () => statuses[route].push(0));
        await new Promise((r) => setTimeout(r, Math.max(0, 20 - (Date.now() - tick))));
      }
    })();
    let results: PromiseSettledResult<Awaited<ReturnType<typeof createAttestedFetch>>>[] = [];
    try {
      // Let the flood drain the address's hardware-report allowance first: its first 429.
      await until(() => statuses.report.includes(429));
      results = await Promise.allSettled(Array.from({ length: 10 }, () => createAttestedFetch({ baseURL: `${sigil.url}/v1`, allowNoTee: true })));
      // The flood goes on a while after, as floods do, until more than 30 of its hardware reports were refused.
      await until(() => statuses.report.filter((s) => s === 429).length > 30);
    } finally {
      flooding = false;
      await flood;
      await new Promise((r) => setTimeout(r, 200));
    }
    const failures = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
    expect(failures).toEqual([]);
    for (const r of results) {
      if (r.status !== 'fulfilled') continue;
      const signed = r.value.attestation.checks.find((c) => c.name === 'attestation.signed_nonce');
      expect(signed === undefined ? 'absent' : checkMark(signed)).toBe('PASS');
      await r.value.close();
    }
    // The flood's hardware reports got no more than their allowance (10 at once, then 5 a second), the rest 429;
    // its signed nonces all answered. Counted, not timed: a loaded machine slows the flood, not the verdict.
    const seconds = (performance.now() - floodStarted) / 1000;
    expect(statuses.report.filter((s) => s === 200).length).toBeLessThanOrEqual(10 + Math.ceil(5 * seconds));
    expect(statuses.report.every((s) => s === 200 || s === 429)).toBe(true);
    expect(statuses.signature.every((s) => s === 200)).toBe(true);
  });
});
