import { Identity } from 'ehbp';
import { EhbpExchange } from '../src/ehbp/request-open.ts';
import { makeEhbpServerKey } from '../src/ehbp/server-key.ts';
const key = await makeEhbpServerKey();
const identity = await Identity.unmarshalPublicConfig(key.keyConfig);
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 });
const answer = new TextEncoder().encode('{"id":"x","object":"chat.completion","choices":[]}'.repeat(8));
const reqs = [];
for (let i = 0; i < 3000; i++) {
  const { request } = await identity.encryptRequestWithContext(new Request('http://sigil/v1/chat/completions', { method: 'POST', body }));
  reqs.push({ enc: Buffer.from(request.headers.get('ehbp-encapsulated-key')!, 'hex'), body: Buffer.from(await request.arrayBuffer()) });
}
const t: Record<string, number> = { setup: 0, open: 0, seal: 0 };
const c0 = process.cpuUsage();
for (const r of reqs) {
  let a = performance.now();
  const ex = await EhbpExchange.setup(key, r.enc);
  let b = performance.now(); t.setup += b - a;
  await ex.open(r.body, 1 << 20);
  a = performance.now(); t.open += a - b;
  ex.sealer.seal(answer);
  b = performance.now(); t.seal += b - a;
}
const c = process.cpuUsage(c0);
console.log('cpu us/req', ((c.user + c.system) / reqs.length).toFixed(1), Object.fromEntries(Object.entries(t).map(([k, v]) => [k, ((v * 1000) / reqs.length).toFixed(1)])));
