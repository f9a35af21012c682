/**
 * What encrypted bodies (EHBP) cost Sigil, measured as ratios in one run: the same Sigil
 * process serves plain and EHBP requests in interleaved rounds; its CPU time (from /proc) per JSON request
 * and per streamed event is compared. The client (npm `ehbp`, on the other core) seals each phase's requests
 * before the phase starts, so its sealing neither counts nor paces Sigil. Every stream is checked event by
 * event: each event must arrive as its own frame (none held back to be merged with the next).
 *
 *   npm run build && npx tsx bench/ehbp.ts [--rounds 5] [--requests 400] [--streams 60] [--tokens 64]
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { fetchServerIdentity, sealRequest, type SealedRequest } from './ehbp-client.ts';
import { LOAD_CORE, PROXY_CORE, ROOT, startEngine, writeSigilConfig } from './peers.ts';
import { cpuMicros, freePort, pin, spawnLogged, stopChild, waitForPort } from './processes.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '400' },
    streams: { type: 'string', default: '60' },
    tokens: { type: 'string', default: '64' },
    concurrency: { type: 'string', default: '8' },
  },
});
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const STREAMS = Number(values.streams);
const TOKENS = Number(values.tokens);
const CONCURRENCY = Number(values.concurrency);

const dir = mkdtempSync(join(tmpdir(), 'sigil-bench-ehbp-'));
pin(process.pid, LOAD_CORE);
const engine = await startEngine(dir, 0, 0);
const port = await freePort();
const { config, key } = writeSigilConfig(join(dir, 'sigil'), engine.port, port, 'warn');
const sigil = spawnLogged(process.execPath, [join(ROOT, 'bin', 'sigil.js'), 'serve', '--config', config], join(dir, 'sigil.log'), { cwd: ROOT });
await waitForPort(port, 30_000, sigil.child);
pin(sigil.pid, PROXY_CORE);
const base = `http://127.0.0.1:${port}`;
const agent = new Agent({ connections: CONCURRENCY * 2 });
const identity = await fetchServerIdentity(base, agent);
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const body = (stream: boolean) => JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: TOKENS, stream });

interface Tally {
  events: number;
  frames: number;
  mergedReads: number;
}

/** A request ready to send: sealed ahead of the timed phase, so the client's sealing does not pace Sigil's sealed phase. */
async function prepare(sealed: boolean, stream: boolean): Promise<SealedRequest> {
  return sealed ? sealRequest(identity, `${base}/v1/chat/completions`, headers, body(stream)) : { headers, body: Buffer.from(body(stream)) };
}

/** One request, plain or sealed; counts the events (plain: `data:` lines) or frames (sealed) and reads carrying more than one. */
async function once(prepared: SealedRequest, sealed: boolean, stream: boolean, tally: Tally): Promise<void> {
  const response = await request(`${base}/v1/chat/completions`, { method: 'POST', headers: prepared.headers, body: prepared.body, dispatcher: agent });
  if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}: ${await response.body.text()}`);
  let pending = Buffer.alloc(0);
  for await (const chunk of response.body) {
    if (!stream) continue;
    if (sealed) {
      pending = Buffer.concat([pending, chunk as Buffer]);
      let inRead = 0;
      while (pending.length >= 4 && pending.length >= 4 + pending.readUInt32BE(0)) {
        pending = pending.subarray(4 + pending.readUInt32BE(0));
        inRead++;
      }
      tally.frames += inRead;
      if (inRead > 1) tally.mergedReads++;
    } else {
      const events = (chunk as Buffer).toString('latin1').split('\n\n').length - 1;
      tally.events += events;
      if (events > 1) tally.mergedReads++;
    }
  }
}

async function phase(sealed: boolean, stream: boolean, count: number): Promise<{ cpuUs: number; tally: Tally; seconds: number }> {
  const tally: Tally = { events: 0, frames: 0, mergedReads: 0 };
  const prepared = await Promise.all(Array.from({ length: count }, () => prepare(sealed, stream)));
  let next = 0;
  const cpu0 = cpuMicros([sigil.pid]);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        await once(prepared[next++]!, sealed, stream, tally);
      }
    }),
  );
  return { cpuUs: cpuMicros([sigil.pid]) - cpu0, tally, seconds: (performance.now() - t0) / 1000 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results = { plainJson: [] as number[], sealedJson: [] as number[], plainEvent: [] as number[], sealedEvent: [] as number[] };
const merged = { plain: 0, sealed: 0, plainEvents: 0, sealedFrames: 0 };
// Warm up both paths (JIT, connections).
await phase(false, false, 100);
await phase(true, false, 100);
for (let round = 0; round < ROUNDS; round++) {
  const pj = await phase(false, false, REQUESTS);
  const sj = await phase(true, false, REQUESTS);
  const ps = await phase(false, true, STREAMS);
  const ss = await phase(true, true, STREAMS);
  results.plainJson.push(pj.cpuUs / REQUESTS);
  results.sealedJson.push(sj.cpuUs / REQUESTS);
  // Events per stream: the engine's tokens plus the role chunk and [DONE]; frames add the final receipt-less end.
  results.plainEvent.push(ps.cpuUs / ps.tally.events);
  results.sealedEvent.push(ss.cpuUs / ss.tally.frames);
  merged.plain += ps.tally.mergedReads;
  merged.sealed += ss.tally.mergedReads;
  merged.plainEvents += ps.tally.events;
  merged.sealedFrames += ss.tally.frames;
  process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
}
await agent.close();
await stopChild(sigil.child);
await stopChild(engine.spawned.child);

const row = (name: string, plain: number[], sealed: number[]) =>
  `| ${name} | ${median(plain).toFixed(1)} | ${median(sealed).toFixed(1)} | ${(median(sealed) / median(plain)).toFixed(2)}× |`;
console.log(
  `EHBP cost in Sigil's process, medians of ${ROUNDS} interleaved rounds (${REQUESTS} JSON requests, ${STREAMS} streams of ${TOKENS} tokens per round, concurrency ${CONCURRENCY})\n`,
);
console.log('| Sigil CPU | plain (µs) | EHBP (µs) | ratio |');
console.log('|---|---|---|---|');
console.log(row('per JSON request', results.plainJson, results.sealedJson));
console.log(row('per streamed event', results.plainEvent, results.sealedEvent));
console.log(
  `\nstream events received: plain ${merged.plainEvents} (reads carrying more than one event: ${merged.plain}); EHBP frames ${merged.sealedFrames} (reads carrying more than one frame: ${merged.sealed})`,
);
