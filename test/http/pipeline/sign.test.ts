import { describe, expect, it } from 'vitest';
import { sha256 } from '../../../src/http/pipeline/sign.ts';
import { engineAndSigil } from '../../support/engine-and-sigil.ts';

const served = engineAndSigil({
  modelNames: ['engine/renamed', 'm'],
  models: [{ id: 'renamed', upstream_model: 'engine/renamed', upstream: 'e' }, { id: 'm' }],
});

const claims = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
const post = (body: string) =>
  fetch(`${served.sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${served.sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true', 'x-service-nonce': 'nonce-1' },
    body,
  });

describe('the sign step', () => {
  it('writes digests as sha256:<hex>', () => {
    expect(sha256(Buffer.from('abc'))).toBe('sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it("signs the message receipt of a JSON answer over the client's request, the engine's request and the answer as sent", async () => {
    const body = '{"model":"renamed","messages":[{"role":"user","content":"hi"}]}';
    const res = await post(body);
    expect(res.status).toBe(200);
    const answer = Buffer.from(await res.arrayBuffer());
    const receipt = claims(res.headers.get('x-service-receipt')!);
    expect(receipt).toMatchObject({
      receipt_type: 'message',
      receipt_id: res.headers.get('x-service-receipt-id'),
      nonce: 'nonce-1',
      selected_model: { model_id: 'renamed' },
      request_hash: sha256(Buffer.from(body)),
      forwarded_request_hash: sha256(served.engine.requests.at(-1)!.body),
      response_hash: sha256(answer),
      completion_id: (JSON.parse(answer.toString('utf8')) as { id: string }).id,
    });
    const stored = await fetch(`${served.sigil.url}/v1/receipts/${receipt.receipt_id as string}`, { headers: { authorization: `Bearer ${served.sigil.key}` } });
    expect(stored.status).toBe(200);
  });

  it('leaves forwarded_request_hash out when the engine got the very bytes the client sent', async () => {
    const body = '{"model":"m","messages":[{"role":"user","content":"hi"}]}';
    const receipt = claims((await post(body)).headers.get('x-service-receipt')!);
    expect(receipt.request_hash).toBe(sha256(Buffer.from(body)));
    expect('forwarded_request_hash' in receipt).toBe(false);
  });

  it('signs a stream twice under one receipt id: the model receipt in the headers before generation, the message receipt as the last comment', async () => {
    const res = await post('{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}');
    const id = res.headers.get('x-service-receipt-id');
    const model = claims(res.headers.get('x-service-receipt')!);
    expect(model).toMatchObject({ receipt_type: 'model', receipt_id: id, nonce: 'nonce-1' });
    expect('request_hash' in model).toBe(false);
    const text = await res.text();
    const last = /: receipt (\S+)\n\n$/.exec(text);
    expect(last).not.toBeNull();
    expect(claims(last![1]!)).toMatchObject({ receipt_type: 'message', receipt_id: id, nonce: 'nonce-1' });
  });
});
