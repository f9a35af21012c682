import { Identity } from 'ehbp';
import * as crypto from 'node:crypto';
import { x25519 } from '../src/ehbp/node-crypto-hpke.ts';
import { EhbpExchange } from '../src/ehbp/request-open.ts';
import { makeEhbpServerKey } from '../src/ehbp/server-key.ts';
const counts: Record<string, number> = {};
for (const k of ['scalarMult', 'scalarMultBase', 'getSharedSecret', 'getPublicKey'] as const) { const f = (x25519 as any)[k]; (x25519 as any)[k] = (...a: unknown[]) => { counts[k] = (counts[k] ?? 0) + 1; return f(...a); }; }
const key = await makeEhbpServerKey();
const identity = await Identity.unmarshalPublicConfig(key.keyConfig);
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 });
const reqs = [];
for (let i = 0; i < 10; i++) {
  const { request } = await identity.encryptRequestWithContext(new Request('http://sigil/v1/chat/completions', { method: 'POST', body }));
  reqs.push({ enc: Buffer.from(request.headers.get('ehbp-encapsulated-key')!, 'hex'), body: Buffer.from(await request.arrayBuffer()) });
}
for (const k of Object.keys(counts)) counts[k] = 0;
const origHmac = crypto.createHmac; let hmacs = 0;
for (const r of reqs) { const ex = await EhbpExchange.setup(key, r.enc); await ex.open(r.body, 1 << 20); ex.sealer.seal(new Uint8Array(100)); }
console.log('per request', Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v / 10])));
