import { describe, expect, it } from 'vitest';
import { engineAndSigil } from '../../support/engine-and-sigil.ts';

const ORIGIN = 'https://app.example';

const served = engineAndSigil({ modelNames: ['m'], models: [{ id: 'm' }], config: { cors: { allowed_origins: [ORIGIN] } } });

const preflight = (path: string, origin: string, requestHeaders?: string) =>
  fetch(`${served.sigil.url}${path}`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', ...(requestHeaders === undefined ? {} : { 'access-control-request-headers': requestHeaders }) },
  });

/** What a browser may send: the receipt headers, a sealed request's encapsulated key, an Anthropic client's key and version headers, and what the official SDKs add to every request. */
const ALLOWED_HEADERS = [
  'authorization, content-type, x-service-receipt, x-service-nonce, ehbp-encapsulated-key',
  'x-api-key, anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access',
  'x-stainless-arch, x-stainless-lang, x-stainless-os, x-stainless-package-version, x-stainless-runtime, x-stainless-runtime-version',
  'x-stainless-retry-count, x-stainless-timeout, x-stainless-helper, x-stainless-helper-method',
].join(', ');

describe('the CORS step', () => {
  it("answers an allowed origin's preflight itself with 204, naming the route's methods", async () => {
    const res = await preflight('/v1/chat/completions', ORIGIN);
    expect(res.status).toBe(204);
    expect(Object.fromEntries([...res.headers].filter(([name]) => name.startsWith('access-control-') || name === 'vary'))).toEqual({
      'access-control-allow-origin': ORIGIN,
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers': ALLOWED_HEADERS,
      'access-control-expose-headers':
        'x-service-receipt, x-service-receipt-id, x-service-log-index, ehbp-response-nonce, x-request-id, request-id, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset, retry-after',
      'access-control-max-age': '600',
      vary: 'Origin',
    });
    expect((await preflight('/v1/models', ORIGIN)).headers.get('access-control-allow-methods')).toBe('GET, HEAD');
    expect(served.engine.requests.filter((r) => r.method !== 'GET')).toHaveLength(0);
  });

  it('allows what @anthropic-ai/sdk sends from a browser (dangerouslyAllowBrowser) on /v1/messages, so its preflight is not refused', async () => {
    // The headers chromium names in the preflight of the SDK's messages.create, in the order it lists them.
    const requested =
      'anthropic-dangerous-direct-browser-access,anthropic-version,content-type,x-api-key,x-stainless-arch,x-stainless-lang,x-stainless-os,x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout';
    const res = await preflight('/v1/messages', ORIGIN, requested);
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(res.headers.get('access-control-allow-methods')).toBe('POST');
    const allowed = res.headers.get('access-control-allow-headers')!.split(', ');
    expect(requested.split(',').filter((name) => !allowed.includes(name))).toEqual([]);
    expect(allowed).toEqual(expect.arrayContaining(['x-api-key', 'anthropic-version', 'anthropic-beta']));
  });

  it('gives an origin not listed no CORS header on a private route, so its preflight falls through to 405', async () => {
    const res = await preflight('/v1/chat/completions', 'https://elsewhere.example');
    expect(res.status).toBe(405);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect(res.headers.get('allow')).toBe('POST');
  });

  it('serves the public documents to any page with *, and the private ones without', async () => {
    const models = await fetch(`${served.sigil.url}/v1/models`, { headers: { origin: 'https://elsewhere.example' } });
    expect(models.headers.get('access-control-allow-origin')).toBe('*');
    const healthz = await fetch(`${served.sigil.url}/healthz`, { headers: { origin: 'https://elsewhere.example' } });
    expect(healthz.headers.get('access-control-allow-origin')).toBeNull();
  });
});
