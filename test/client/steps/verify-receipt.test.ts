import { describe, expect, it } from 'vitest';
import type { Attested } from '../../../src/client/attest.ts';
import { UNVERIFIED_HEADER } from '../../../src/client/steps/seal.ts';
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

  it('marks an answer that asked for no receipt as unverified when TLS does not end in the enclave', async () => {
    const answer = new Response('{}', { status: 200 });
    const behind = await verifyReceipt(client, answered(answer, { wantsReceipt: false, attested: { tlsSpkiSha256: null } as Attested }));
    expect(behind.headers.get(UNVERIFIED_HEADER)).toMatch(/^this answer was neither sealed/);
    const pinned = await verifyReceipt(client, answered(new Response('{}'), { wantsReceipt: false }));
    expect(pinned.headers.get(UNVERIFIED_HEADER)).toBeNull();
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
