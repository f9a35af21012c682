import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { get } from 'node:http';
import { createAttestedFetch, type AttestedFetchOptions } from '../../src/client/index.ts';
import { checkMark } from '../../src/verify/check.ts';
import { startForwardingProxy, type ForwardingProxy } from '../support/forwarding-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { waitFor } from '../support/wait-for.ts';

/**
 * docs/attestation.md, "Freshness from a signed nonce", and docs/configuration.md, `listen.trusted_proxies`: behind a
 * load balancer every caller reaches Sigil from one address, and an anonymous flood there cannot keep attested
 * clients from attesting.
 */
let engine: TestEngine;
let sigil: TestSigil;
let behindProxy: TestSigil;
let proxy: ForwardingProxy;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
  behindProxy = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { listen: { host: '127.0.0.1', port: 0, trusted_proxies: ['127.0.0.2/32'] } },
  });
  proxy = await startForwardingProxy(sigil.url);
});

afterAll(async () => {
  await proxy.close();
  await behindProxy.close(0);
  await sigil.close(0);
  await engine.close();
});

const freshNonce = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex');

type Route = 'report' | 'signature';

/** An anonymous loop at 50 requests a second to `base`, through `routes` in turn, until stopped; every status kept. */
function startFlood(base: string, routes: Route[], headers: () => Record<string, string> = () => ({})) {
  const statuses = { report: [] as number[], signature: [] as number[] };
  const { hostname, port } = new URL(base);
  let flooding = true;
  let sent = 0;
  let answered = 0;
  const started = performance.now();
  const loop = (async () => {
    while (flooding) {
      const tick = Date.now();
      const route = routes[sent++ % routes.length]!;
      get(
        { host: hostname, port, localAddress: '127.0.0.1', path: `/v1/verify/attestation?nonce=${freshNonce()}&proof=${route}`, headers: headers() },
        (res) => {
          statuses[route].push(res.statusCode ?? 0);
          answered++;
          res.resume();
        },
      ).on('error', () => {
        statuses[route].push(0);
        answered++;
      });
      // real clock: the flood's rate (50 requests a second) is what the allowances are tested against
      await new Promise((r) => setTimeout(r, Math.max(0, 20 - (Date.now() - tick))));
    }
  })();
  return {
    statuses,
    seconds: () => (performance.now() - started) / 1000,
    stop: async () => {
      flooding = false;
      await loop;
      await waitFor('every flood request answered', () => answered === sent);
    },
  };
}

/** Starts the clients once the flood has spent its hardware-report allowance, and lets the flood go on a while after. */
async function clientsDuringFlood(flood: ReturnType<typeof startFlood>, clients: AttestedFetchOptions[]) {
  let results: PromiseSettledResult<Awaited<ReturnType<typeof createAttestedFetch>>>[] = [];
  try {
    await waitFor('a 429 for the flood', () => flood.statuses.report.includes(429));
    results = await Promise.allSettled(clients.map((options) => createAttestedFetch(options)));
    await waitFor('over 30 429s for the flood', () => flood.statuses.report.filter((s) => s === 429).length > 30);
  } finally {
    await flood.stop();
  }
  const failures = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
  for (const r of results) if (r.status === 'fulfilled') await r.value.close();
  return { failures, attested: results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : [])) };
}

describe('attestation allowances behind a load balancer', () => {
  it('ten attested clients asking for signed nonces start during a 50/s anonymous flood, all through one proxy: all ten attest, the flood is limited', async () => {
    const flood = startFlood(proxy.url, ['report', 'signature']);
    const { failures, attested } = await clientsDuringFlood(
      flood,
      Array.from({ length: 10 }, () => ({ baseURL: `${proxy.url}/v1`, allowNoTee: true })),
    );
    expect(failures).toEqual([]);
    for (const a of attested) {
      const signed = a.attestation.checks.find((c) => c.name === 'attestation.signed_nonce');
      expect(signed === undefined ? 'absent' : checkMark(signed)).toBe('PASS');
    }
    // The flood's hardware reports got no more than their allowance (10 at once, then 5 a second), the rest 429;
    // its signed nonces all answered. Counted, not timed: a loaded machine slows the flood, not the verdict.
    expect(flood.statuses.report.filter((s) => s === 200).length).toBeLessThanOrEqual(10 + Math.ceil(5 * flood.seconds()));
    expect(flood.statuses.report.every((s) => s === 200 || s === 429)).toBe(true);
    expect(flood.statuses.signature.every((s) => s === 200)).toBe(true);
  });

  it("ten attested clients asking for fresh hardware reports with their API keys start during a 50/s anonymous flood of hardware reports through the same proxy: each key's own allowance is used, all ten attest", async () => {
    const flood = startFlood(proxy.url, ['report']);
    const { failures, attested } = await clientsDuringFlood(
      flood,
      Array.from({ length: 10 }, (_, i) => ({
        baseURL: `${proxy.url}/v1`,
        allowNoTee: true,
        freshReport: true,
        apiKey: i % 2 === 0 ? sigil.key : sigil.otherKey,
      })),
    );
    expect(failures).toEqual([]);
    expect(attested).toHaveLength(10);
    expect(flood.statuses.report.filter((s) => s === 200).length).toBeLessThanOrEqual(10 + Math.ceil(5 * flood.seconds()));
  });

  it('behind a trusted proxy, anonymous clients are told apart by X-Forwarded-For: five start during a flood from another forwarded address, all attest', async () => {
    const floodProxy = await startForwardingProxy(behindProxy.url, { localAddress: '127.0.0.2', forwardedFor: () => '203.0.113.7' });
    const clientProxy = await startForwardingProxy(behindProxy.url, { localAddress: '127.0.0.2', forwardedFor: () => '198.51.100.1' });
    try {
      const flood = startFlood(floodProxy.url, ['report']);
      const { failures } = await clientsDuringFlood(
        flood,
        Array.from({ length: 5 }, () => ({ baseURL: `${clientProxy.url}/v1`, allowNoTee: true, freshReport: true })),
      );
      expect(failures).toEqual([]);
      expect(flood.statuses.report.filter((s) => s === 200).length).toBeLessThanOrEqual(10 + Math.ceil(5 * flood.seconds()));
    } finally {
      await floodProxy.close();
      await clientProxy.close();
    }
  });

  it('X-Forwarded-For from a peer that is not a trusted proxy is ignored: a flood naming a new address in each request still spends one allowance', async () => {
    let n = 0;
    const flood = startFlood(behindProxy.url, ['report'], () => ({ 'x-forwarded-for': `192.0.2.${++n % 250}` }));
    try {
      await waitFor('over 10 429s for the flood', () => flood.statuses.report.filter((s) => s === 429).length > 10);
    } finally {
      await flood.stop();
    }
    expect(flood.statuses.report.filter((s) => s === 200).length).toBeLessThanOrEqual(10 + Math.ceil(5 * flood.seconds()));
  });
});
