import { describe, expect, it } from 'vitest';
import { engineAndSigil } from '../../support/engine-and-sigil.ts';

const served = engineAndSigil({
  modelNames: ['m', 'e'],
  models: [{ id: 'm' }, { id: 'e', endpoints: ['embeddings'] }],
});

const post = (body: string, path = '/v1/chat/completions') =>
  fetch(`${served.sigil.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${served.sigil.key}`, 'content-type': 'application/json' }, body });
const error = async (res: Response) => ({ status: res.status, ...((await res.json()) as { error: unknown }) });

describe('the validate step', () => {
  it('refuses, without asking the engine, a body that is not a JSON object, a missing or unknown model, and a model not served here', async () => {
    expect(await error(await post('{"model":'))).toEqual({
      status: 400,
      error: { message: 'The request body is not valid JSON.', type: 'invalid_request_error', param: null, code: 'invalid_json' },
    });
    expect(await error(await post('[1]'))).toEqual({
      status: 400,
      error: { message: 'The request body must be a JSON object.', type: 'invalid_request_error', param: null, code: 'invalid_json' },
    });
    expect(await error(await post(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] })))).toEqual({
      status: 400,
      error: { message: "Missing required parameter: 'model'.", type: 'invalid_request_error', param: 'model', code: 'missing_required_parameter' },
    });
    expect(await error(await post(JSON.stringify({ model: 'nope', messages: [{ role: 'user', content: 'hi' }] })))).toEqual({
      status: 404,
      error: {
        message: "The model 'nope' does not exist or you do not have access to it.",
        type: 'invalid_request_error',
        param: 'model',
        code: 'model_not_found',
      },
    });
    const notServed = await error(await post(JSON.stringify({ model: 'e', messages: [{ role: 'user', content: 'hi' }] })));
    expect(notServed).toMatchObject({ status: 400, error: { param: 'model', code: 'model_not_supported' } });
    expect(await error(await post(JSON.stringify({ model: 'm', messages: [] })))).toEqual({
      status: 400,
      error: { message: "'messages' must be a non-empty array.", type: 'invalid_request_error', param: 'messages', code: 'invalid_value' },
    });
    expect(served.engine.requests.filter((r) => r.method === 'POST')).toHaveLength(0);
  });

  it('passes a valid request on, its bytes untouched when the engine knows the model by the same name', async () => {
    const body = '{"model":"m",  "messages":[{"role":"user","content":"hi"}],"max_tokens":1e1}';
    const res = await post(body);
    expect(res.status).toBe(200);
    expect(served.engine.requests.at(-1)!.body.toString('utf8')).toBe(body);
  });
});
