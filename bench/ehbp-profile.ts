/**
 * Where a served Sigil spends a sealed (EHBP) or clear JSON request: Sigil from dist/ under `node --cpu-prof`, pinned
 * to the proxy core, 6,000 requests at c=8 (sealed ahead by the npm `ehbp` client), then the functions with the most
 * self time per request (bench/profile.ts). The profile samples wall time; with the proxy core busy that is close
 * to its CPU, but start-up (module compilation) is in it too, spread over the requests.
 *
 *   npm run build && npx tsx bench/ehbp-profile.ts sealed|clear
 */
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { fetchServerIdentity, sealBatch, sendBackToBack } from './ehbp-client.ts';
import { LOAD_CORE, PROXY_CORE, ROOT, startEngine, writeSigilConfig } from './peers.ts';
import { freePort, pin, spawnLogged, stopChild, waitForPort } from './processes.ts';
import { topSelfTime } from './profile.ts';

const sealed = process.argv[2] === 'sealed';
if (!sealed && process.argv[2] !== 'clear') throw new Error('usage: npx tsx bench/ehbp-profile.ts sealed|clear');
const dir = mkdtempSync(join(tmpdir(), 'sigil-prof-ehbp-'));
pin(process.pid, LOAD_CORE);
const engine = await startEngine(dir, 0, 0);
const port = await freePort();
const { config, key } = writeSigilConfig(join(dir, 'sigil'), engine.port, port, 'warn');
const profDir = join(dir, 'prof');
const sigil = spawnLogged(
  process.execPath,
  ['--cpu-prof', '--cpu-prof-dir', profDir, join(ROOT, 'bin', 'sigil.js'), 'serve', '--config', config],
  join(dir, 'sigil.log'),
  { cwd: ROOT },
);
await waitForPort(port, 30_000, sigil.child);
pin(sigil.pid, PROXY_CORE);
const base = `http://127.0.0.1:${port}`;
const agent = new Agent({ connections: 16 });
const identity = await fetchServerIdentity(base, agent);
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 });
const N = 6000;
const prepared = sealed
  ? await sealBatch(identity, `${base}/v1/chat/completions`, headers, body, N)
  : Array.from({ length: N }, () => ({ headers, body: Buffer.from(body) }));
const r = await sendBackToBack(`${base}/v1/chat/completions`, prepared as never, 8, 60, agent, async (res) => {
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  await res.body.arrayBuffer();
});
await agent.close();
await stopChild(sigil.child, 'SIGTERM', 60_000);

const file = join(
  profDir,
  readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'))!,
);
const { totalMs, top } = topSelfTime(file, ROOT, 40);
console.log(`${sealed ? 'sealed' : 'clear'}: ${r.sent} requests; sampled ${totalMs.toFixed(0)} ms`);
for (const f of top) console.log(`${((f.ms * 1000) / r.sent).toFixed(1).padStart(7)} µs  ${f.name}  ${f.where}`);
process.exit(0);
