/**
 * What `sigil connect` adds per JSON request and per streamed event (docs/connect.md): an app calling connect
 * on loopback against the same app doing connect's work itself, in its own process, with the attested client
 * (sealing, receipt verification). Both go to one Sigil (EHBP on, receipts on every request) in front of the fast fake
 * engine. Reported per phase: wall time per request, and connect's own CPU (from /proc) per request and per event.
 * Phases alternate in every round, so load on the shared machine falls on both alike.
 *
 *   npm run build && npx tsx bench/connect.ts [--rounds 5] [--requests 200] [--streams 40] [--tokens 64]
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Agent, fetch as undiciFetch } from 'undici';
import { createAttestedFetch } from '../src/client/index.ts';
import { ROOT, startEngine, writeSigilConfig } from './peers.ts';
import { cpuMicros, freePort, spawnLogged, stopChild, waitForPort } from './processes.ts';
import { summarize } from './stats.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '200' },
    streams: { type: 'string', default: '40' },
    tokens: { type: 'string', default: '64' },
  },
});
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const STREAMS = Number(values.streams);
const TOKENS = Number(values.tokens);

const dir = mkdtempSync(join(tmpdir(), 'sigil-bench-connect-'));
const engine = await startEngine(dir, 0, 0);
const port = await freePort();
const { config, key } = writeSigilConfig(join(dir, 'sigil'), engine.port, port, 'warn');
const sigil = spawnLogged(process.execPath, [join(ROOT, 'bin', 'sigil.js'), 'serve', '--config', config], join(dir, 'sigil.log'), { cwd: ROOT });
await waitForPort(port, 30_000, sigil.child);
const service = `http://127.0.0.1:${port}`;
const connectPort = await freePort();
const connect = spawnLogged(
  process.execPath,
  [join(ROOT, 'bin', 'sigil.js'), 'connect', service, '--allow-insecure-http', '--allow-no-tee', '--listen', `127.0.0.1:${connectPort}`],
  join(dir, 'connect.log'),
  { cwd: ROOT },
);
await waitForPort(connectPort, 30_000, connect.child);
const attested = await createAttestedFetch({ baseURL: `${service}/v1`, allowNoTee: true });
const agent = new Agent({ connections: 4 });
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const body = (stream: boolean) => JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: TOKENS, stream });

type Send = (stream: boolean) => Promise<number>;
/** The app doing the verification itself: the attested client in this process. */
const selfVerified: Send = async (stream) => {
  const answer = await attested(`${service}/v1/chat/completions`, { method: 'POST', headers, body: body(stream) });
  const text = await answer.text();
  if (answer.status !== 200) throw new Error(`attested client: HTTP ${answer.status}: ${text}`);
  return text.length;
};
/** The app through connect: a plain request on loopback. */
const throughConnect: Send = async (stream) => {
  const answer = await undiciFetch(`http://127.0.0.1:${connectPort}/v1/chat/completions`, { method: 'POST', headers, body: body(stream), dispatcher: agent });
  const text = await answer.text();
  if (answer.status !== 200 || (stream && !text.endsWith('data: [DONE]\n\n'))) throw new Error(`connect: HTTP ${answer.status}: ${text.slice(-300)}`);
  return text.length;
};

interface Phase {
  wallUs: number[];
  connectCpuUs: number[];
  /** This process's CPU: the app's own (the attested client when self-verified, a plain HTTP client through connect). */
  appCpuUs: number[];
}
const phases: Record<string, Phase> = {};
async function phase(name: string, send: Send, stream: boolean, count: number): Promise<void> {
  const p = (phases[name] ??= { wallUs: [], connectCpuUs: [], appCpuUs: [] });
  const cpu0 = cpuMicros([connect.pid]);
  const app0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < count; i++) await send(stream);
  p.wallUs.push(Number(process.hrtime.bigint() - t0) / 1000 / count);
  const app = process.cpuUsage(app0);
  p.appCpuUs.push((app.user + app.system) / count);
  p.connectCpuUs.push((cpuMicros([connect.pid]) - cpu0) / count);
}

try {
  // Warm-up: both paths, both kinds.
  for (const send of [selfVerified, throughConnect]) for (const stream of [false, true]) for (let i = 0; i < 20; i++) await send(stream);
  for (let round = 0; round < ROUNDS; round++) {
    const order: Array<[string, Send]> = [
      ['self-verified', selfVerified],
      ['through connect', throughConnect],
    ];
    if (round % 2 === 1) order.reverse();
    for (const [name, send] of order) {
      await phase(`${name} JSON`, send, false, REQUESTS);
      await phase(`${name} stream`, send, true, STREAMS);
    }
  }
  const median = (xs: number[]) => summarize(xs).p50;
  const row = (name: string) => phases[name]!;
  const lines = [
    `connect bench: ${ROUNDS} rounds, ${REQUESTS} JSON requests and ${STREAMS} streams of ${TOKENS} events a phase, sequential; medians over rounds`,
    '| | wall µs / JSON request | wall µs / stream | app CPU µs / JSON request | connect CPU µs / JSON request | app CPU µs / stream event | connect CPU µs / stream event |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const who of ['self-verified', 'through connect']) {
    const json = row(`${who} JSON`);
    const stream = row(`${who} stream`);
    const connectCpu = who === 'through connect' ? [median(json.connectCpuUs).toFixed(0), (median(stream.connectCpuUs) / TOKENS).toFixed(1)] : ['-', '-'];
    lines.push(
      `| ${who} | ${median(json.wallUs).toFixed(0)} | ${median(stream.wallUs).toFixed(0)} | ${median(json.appCpuUs).toFixed(0)} | ${connectCpu[0]} | ${(median(stream.appCpuUs) / TOKENS).toFixed(1)} | ${connectCpu[1]} |`,
    );
  }
  const cpuPer = (who: string, kind: 'JSON' | 'stream', of: 'appCpuUs' | 'connectCpuUs') =>
    median(row(`${who} ${kind}`)[of]) / (kind === 'stream' ? TOKENS : 1);
  // Connect's own cost: what the app and connect spend together through connect, minus what the app spends verifying itself.
  const addedJson =
    cpuPer('through connect', 'JSON', 'appCpuUs') + cpuPer('through connect', 'JSON', 'connectCpuUs') - cpuPer('self-verified', 'JSON', 'appCpuUs');
  const addedEvent =
    cpuPer('through connect', 'stream', 'appCpuUs') + cpuPer('through connect', 'stream', 'connectCpuUs') - cpuPer('self-verified', 'stream', 'appCpuUs');
  lines.push(
    '',
    `connect's overhead (CPU, app and connect together, over the app verifying itself): ${addedJson.toFixed(0)} µs per JSON request, ${addedEvent.toFixed(1)} µs per stream event`,
  );
  process.stdout.write(lines.join('\n') + '\n');
} finally {
  await attested.close();
  await agent.close();
  await stopChild(connect.child);
  await stopChild(sigil.child);
  await stopChild(engine.spawned.child);
}
