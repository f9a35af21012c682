import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['alpha', 'beta', 'org/gamma'] });
  sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [
      { id: 'alpha', provider: 'acme', regions: ['eu-west', 'us-east'], reasoning: true },
      { id: 'beta', provider: 'globex', regions: ['us-east'], reasoning: false, context_window: 32768 },
      { id: 'org/gamma', provider: 'acme', regions: ['ap-south'], endpoints: ['embeddings'] },
    ],
  });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const get = async (path: string) => {
  const res = await fetch(`${sigil.url}${path}`);
  return { status: res.status, body: await res.json() };
};

describe('GET /v1/models', () => {
  it('lists every catalogue model without auth, in the OpenAI list shape', async () => {
    expect(await get('/v1/models')).toEqual({
      status: 200,
      body: {
        object: 'list',
        data: [
          {
            id: 'alpha',
            object: 'model',
            created: 1_700_000_000,
            owned_by: 'acme',
            name: 'Model alpha',
            context_window: 131072,
            reasoning: true,
            endpoints: ['chat', 'completions', 'responses'],
          },
          {
            id: 'beta',
            object: 'model',
            created: 1_700_000_001,
            owned_by: 'globex',
            name: 'Model beta',
            context_window: 32768,
            reasoning: false,
            endpoints: ['chat', 'completions', 'responses'],
          },
          {
            id: 'org/gamma',
            object: 'model',
            created: 1_700_000_002,
            owned_by: 'acme',
            name: 'Model org/gamma',
            context_window: 131072,
            reasoning: true,
            endpoints: ['embeddings'],
          },
        ],
      },
    });
  });

  it('adds provider, regions and pricing with detail=true', async () => {
    const { body } = await get('/v1/models?detail=true');
    expect(body.data[0]).toEqual({
      id: 'alpha',
      object: 'model',
      created: 1_700_000_000,
      owned_by: 'acme',
      name: 'Model alpha',
      context_window: 131072,
      reasoning: true,
      endpoints: ['chat', 'completions', 'responses'],
      provider: 'acme',
      regions: ['eu-west', 'us-east'],
      pricing: { input_per_mtok: 0.5, output_per_mtok: 1.5, currency: 'USD' },
    });
  });

  it('keeps the models served in a region', async () => {
    expect((await get('/v1/models?region=us-east')).body.data.map((m: { id: string }) => m.id)).toEqual(['alpha', 'beta']);
    expect((await get('/v1/models?region=mars')).body).toEqual({ object: 'list', data: [] });
  });

  it('keeps the models of a provider, and combines filters', async () => {
    expect((await get('/v1/models?provider=acme')).body.data.map((m: { id: string }) => m.id)).toEqual(['alpha', 'org/gamma']);
    expect(
      (await get('/v1/models?provider=acme&region=ap-south&detail=true')).body.data.map((m: { id: string; provider: string }) => [m.id, m.provider]),
    ).toEqual([['org/gamma', 'acme']]);
  });

  it('refuses a detail value that is not true or false, on the list and on one model alike', async () => {
    const refusal = {
      status: 400,
      body: { error: { message: "'detail' must be true or false.", type: 'invalid_request_error', param: 'detail', code: 'invalid_value' } },
    };
    expect(await get('/v1/models?detail=yes')).toEqual(refusal);
    // Before: one model's detail=yes was read as false and answered 200.
    expect(await get('/v1/models/org/gamma?detail=yes')).toEqual(refusal);
  });
});

describe('GET /v1/models/{id}', () => {
  it('retrieves one model, including ids with a slash, raw or encoded', async () => {
    expect((await get('/v1/models/beta')).body).toEqual({
      id: 'beta',
      object: 'model',
      created: 1_700_000_001,
      owned_by: 'globex',
      name: 'Model beta',
      context_window: 32768,
      reasoning: false,
      endpoints: ['chat', 'completions', 'responses'],
    });
    expect((await get('/v1/models/org/gamma')).body.id).toBe('org/gamma');
    expect((await get('/v1/models/org%2Fgamma')).body.id).toBe('org/gamma');
  });

  it('answers 404 model_not_found for an unknown id', async () => {
    expect(await get('/v1/models/nope')).toEqual({
      status: 404,
      body: {
        error: {
          message: "The model 'nope' does not exist or you do not have access to it.",
          type: 'invalid_request_error',
          param: 'model',
          code: 'model_not_found',
        },
      },
    });
  });
});

describe('catalogue models the engine does not list', () => {
  it('are served with a warning by default, and hidden when hide_unlisted_models is set', async () => {
    const small = await startTestEngine({ modelNames: ['listed'] });
    const serving = await startTestSigil({ upstreams: { main: { url: small.baseUrl } }, models: [{ id: 'listed' }, { id: 'unlisted' }] });
    const hiding = await startTestSigil({
      upstreams: { main: { url: small.baseUrl } },
      models: [{ id: 'listed' }, { id: 'unlisted' }],
      config: { routing: { hide_unlisted_models: true } },
    });
    try {
      const ids = async (s: TestSigil) => ((await (await fetch(`${s.url}/v1/models`)).json()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
      expect(await ids(serving)).toEqual(['listed', 'unlisted']);
      const warning = serving.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'engine does not list this model: served anyway');
      expect(warning).toMatchObject({ level: 40, model: 'unlisted', upstream_model: 'unlisted' });
      expect(await ids(hiding)).toEqual(['listed']);
      const refused = await fetch(`${hiding.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${hiding.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'unlisted', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(refused.status).toBe(404);
      // A reload (SIGHUP or a catalogue edit) builds the served catalogue as start did: still hidden.
      const policyBefore = await (await fetch(`${hiding.url}/v1/verify/policy`)).text();
      expect(await hiding.reload()).toEqual({ keys: true, catalogue: true });
      expect(await ids(hiding)).toEqual(['listed']);
      expect(await (await fetch(`${hiding.url}/v1/verify/policy`)).text()).toBe(policyBefore);
    } finally {
      await Promise.all([serving.close(), hiding.close()]);
      await small.close();
    }
  });
});
