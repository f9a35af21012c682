/**
 * Receipt cost in µs of CPU, measured in-process with process.cpuUsage over N iterations of exactly
 * what Sigil does per request: a receipt id, SHA-256 of the request and response bytes, the claims,
 * and one ES256 signature (a stream adds a second signature: the model receipt in its header). Signatures are made on
 * the calling thread, as every Sigil of the bench makes them (pinned to one core, it has no core free for libuv's
 * thread pool: docs/decisions.md, "Receipts are signed on the event loop unless a core is free"); process.cpuUsage
 * counts every thread.
 */
import { createHash, randomUUID, sign as signBytes } from 'node:crypto';
import { messageReceiptClaims, modelReceiptClaims, type ReceiptContext } from '../src/receipts/claims.ts';
import { createReceiptSigner } from '../src/receipts/signer.ts';
import { loadSigningKey } from '../src/receipts/signing-key.ts';

export interface ReceiptCost {
  iterations: number;
  /** µs CPU: the least one ES256 signature costs through node:crypto (`sign('sha256', bytes, key)` over 600 bytes, on the calling thread). */
  bareSignUs: number;
  /** µs CPU: one ES256 signature over message-receipt claims. */
  signUs: number;
  /** µs CPU: SHA-256 of a request and a response body, hex. */
  hashUs: number;
  /** µs CPU: everything a JSON request with a receipt adds. */
  jsonReceiptUs: number;
  /** µs CPU: everything a stream with receipts adds (model + message receipt). */
  streamReceiptUs: number;
}

const sha256 = (bytes: Buffer) => 'sha256:' + createHash('sha256').update(bytes).digest('hex');

/** CPU of the whole process (the thread pool's signatures included), each iteration awaited before the next. */
async function cpuUsPer(iterations: number, fn: () => unknown): Promise<number> {
  for (let i = 0; i < Math.min(500, iterations); i++) await fn();
  const before = process.cpuUsage();
  for (let i = 0; i < iterations; i++) await fn();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / iterations;
}

export async function measureReceiptCost(iterations: number): Promise<ReceiptCost> {
  const key = await loadSigningKey();
  const sign = createReceiptSigner(key, false);
  const ctx: ReceiptContext = { measurement: '00'.repeat(48), tee: 'none', policyHash: 'sha256:' + '11'.repeat(32) };
  const model = { provider: 'bench', model_id: 'bench-model', model_hash: 'sha256:' + 'ab'.repeat(32) };
  const request = Buffer.from(
    JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello in one short sentence, please.' }], max_tokens: 16 }),
  );
  const response = Buffer.from('x'.repeat(620));
  const message = (responseHash: string) =>
    sign(
      messageReceiptClaims(ctx, {
        receiptId: randomUUID(),
        model,
        nonce: '',
        now: new Date(),
        completionId: 'chatcmpl-0123456789abcdef',
        requestHash: sha256(request),
        responseHash,
      }),
    );
  const signingInput = Buffer.alloc(600, 0x61);
  const bareSignUs = await cpuUsPer(iterations, () => signBytes('sha256', signingInput, key.privateKey));
  const signUs = await cpuUsPer(iterations, () =>
    sign(
      messageReceiptClaims(ctx, { receiptId: 'r', model, nonce: '', now: new Date(), completionId: 'c', requestHash: 'sha256:00', responseHash: 'sha256:00' }),
    ),
  );
  const hashUs = await cpuUsPer(iterations, () => {
    sha256(request);
    sha256(response);
  });
  const jsonReceiptUs = await cpuUsPer(iterations, () => message(sha256(response)));
  const streamReceiptUs = await cpuUsPer(iterations, () =>
    Promise.all([sign(modelReceiptClaims(ctx, { receiptId: randomUUID(), model, nonce: '', now: new Date() })), message(sha256(response))]),
  );
  return { iterations, bareSignUs, signUs, hashUs, jsonReceiptUs, streamReceiptUs };
}
