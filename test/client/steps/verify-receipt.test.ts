import { describe, expect, it } from 'vitest';
import type { Attested } from '../../../src/client/attest.ts';
import { UNVERIFIED_HEADER } from '../../../src/client/steps/unverified.ts';
import type { Answered, ClientContext } from '../../../src/client/steps/stage.ts';
import { verifyReceipt } from '../../../src/client/steps/verify-receipt.ts';
import { brandHeaders } from '../../../src/protocol/brand-headers.ts';

/** The receipt step (src/client/steps/verify-receipt.ts) on answers built here, with a verdict that holds no key at all. */
const records: unknown[] = [];
const client = {
  headerNames: brandHeaders('Service'),
  onInvalid: 'throw',
  maxAnswerBytes: 64,
  session: { attested: { jwks: { keys: [] }, checks: [], tee: 'none', policy: {}, policyHash: '', measurement: '' } },
  inclusion: { applies: false },
  record: (r: unknown) => records.push(r),
  onExchange: undefined,
} as unknown as ClientContext;

const answered = (response: Response, over: Partial<Answered> = {}): Answered =>
  ({
    url: new URL('https://s.example/v1/chat/completions'),
    method: 'POST',
    wantsReceipt: true,
    encrypts: false,
    nonce: 'n',
    body: new Uint8Array(),
    attested: { tlsSpkiSha256: 'a'.repeat(64) } as Attested,
    response,
    ...over,
  }) as Answered;

describe('verifyReceipt', () => {
  it('hands a 2xx JSON answer without a receipt over as an error, never as the answer', async () => {
    const answer = new Response('{"forged":true}', { status: 200, headers: { 'content-type': 'application/json' } });
    await expect(verifyReceipt(client, answered(answer))).rejects.toMatchObject({
      code: 'ERR_VERIFY_RECEIPT',
      message: "the response's receipt did not verify: the response carries no receipt header",
    });
    expect(records).toHaveLength(1);
  });

  it('never hands over a success nothing authenticated: a 200 without a receipt behind TLS that does not end in the enclave is a 502 that says why', async () => {
    const answer = new Response('{"forged":true}', { status: 200, headers: { 'content-type': 'application/json' } });
    const behind = await verifyReceipt(client, answered(answer, { wantsReceipt: false, attested: { tlsSpkiSha256: null } as Attested }));
    expect(behind.status).toBe(502);
    expect(behind.headers.get(UNVERIFIED_HEADER)).toMatch(/^this answer was neither sealed/);
    const body = (await behind.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('unverified_answer');
    expect(body.error.message).toMatch(/^sigil: the service's answer \(HTTP 200\) was not handed over: this answer was neither sealed/);
    expect(JSON.stringify(body)).not.toContain('forged');
    const pinned = await verifyReceipt(client, answered(new Response('{}'), { wantsReceipt: false }));
    expect(pinned.status).toBe(200);
    expect(pinned.headers.get(UNVERIFIED_HEADER)).toBeNull();
  });

  it('hands an error nothing authenticated over as the error it is, its message saying it is unverified', async () => {
    const refusal = new Response('{"error":{"message":"Invalid API key.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}', {
      status: 401,
      headers: { 'content-type': 'application/json' },
    });
    const behind = await verifyReceipt(client, answered(refusal, { wantsReceipt: false, attested: { tlsSpkiSha256: null } as Attested }));
    expect(behind.status).toBe(401);
    expect(behind.headers.get(UNVERIFIED_HEADER)).toMatch(/^this answer was neither sealed/);
    expect(await behind.json()).toEqual({
      error: {
        message: '[unverified: not sealed, not over TLS ending in the enclave] Invalid API key.',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      },
    });
  });

  it('refuses a JSON answer above the cap without holding it, and errors a stream once its bytes pass it', async () => {
    const big = new Response('x'.repeat(65), { status: 200, headers: { 'content-type': 'application/json' } });
    await expect(verifyReceipt(client, answered(big))).rejects.toMatchObject({
      code: 'ERR_READ_TOO_LARGE',
      message: "the service's answer is larger than 64 bytes, the most accepted",
    });
    const stream = new Response('data: ' + 'y'.repeat(64) + '\n\n', { status: 200, headers: { 'content-type': 'text/event-stream' } });
    const relayed = await verifyReceipt(client, answered(stream));
    await expect(relayed.text()).rejects.toMatchObject({
      code: 'ERR_READ_TOO_LARGE',
      message: "the service's event stream is larger than 64 bytes, the most accepted",
    });
  });

  it('passes a refusal (4xx) on as it is: there is no receipt to check', async () => {
    const refusal = new Response('{"error":{}}', { status: 401 });
    expect((await verifyReceipt(client, answered(refusal))).status).toBe(401);
  });
});
