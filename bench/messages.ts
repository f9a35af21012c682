/**
 * What Anthropic's Messages API costs Sigil beside chat completions (docs/api.md#anthropic-messages): one Sigil
 * (from sources, one process pinned to the proxy core) in front of the fake engine, which answers both APIs with
 * the same tokens; every request asks for a receipt. Chat and Messages run alternately, `--rounds` times each, and
 * the Sigil process's CPU (/proc) is divided by the requests (JSON) and by the token events (streams).
 *
 *   node --import tsx bench/messages.ts [--requests 2000] [--streams 300] [--tokens 64] [--concurrency 8] [--rounds 3]
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { describeMachine, sigilCommit } from './machine.ts';
import { BENCH_MODEL, LOAD_CORE, pinnedProcess, ROOT, startEngine, writeSigilConfig } from './peers.ts';
import { cpuMicros, freePort, hasTaskset, pin, runBenchmark, spawnLogged } from './processes.ts';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '2000' },
    streams: { type: 'string', default: '300' },
    tokens: { type: 'string', default: '64' },
    concurrency: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
  },
});
const REQUESTS = Number(values.requests);
const STREAMS = Number(values.streams);
const TOKENS = Number(values.tokens);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);
const log = (msg: string) => process.stderr.write(`[messages-bench] ${msg}\n`);

type Api = 'chat' | 'messages';
const PATHS: Record<Api, string> = { chat: '/v1/chat/completions', messages: '/v1/messages' };

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-messages-bench-'));
  pin(process.pid, LOAD_CORE);
  const engine = await startEngine(dir, 1, 0);
  const port = await freePort();
  const { config, key } = writeSigilConfig(join(dir, 'sigil'), engine.port, port, 'warn', { limits: { shutdown_drain_ms: 0 } });
  writeFileSync(join(dir, 'sigil', 'models.yaml'), stringify({ models: [{ ...BENCH_MODEL, endpoints: ['chat', 'messages'] }] }));
  const command = [process.execPath, '--import', 'tsx', join(ROOT, 'src', 'cli', 'main.ts'), 'serve', '--config', config];
  const [bin, ...args] = hasTaskset ? ['taskset', '-c', '0', ...command] : command;
  const sigil = await pinnedProcess('sigil', spawnLogged(bin!, args, join(dir, 'sigil.log'), { cwd: ROOT }), port, {
    host: '127.0.0.1',
    port,
    path: '/',
    headers: {},
  });
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });

  /** One request, its answer read whole; the number of token events it carried. */
  const once = (api: Api, stream: boolean): Promise<number> =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify({ model: 'bench-model', max_tokens: TOKENS, stream, messages: [{ role: 'user', content: 'hello' }] });
      const headers: Record<string, string> = { 'content-type': 'application/json', 'x-service-receipt': 'true' };
      if (api === 'messages') Object.assign(headers, { 'x-api-key': key, 'anthropic-version': '2023-06-01' });
      else headers.authorization = `Bearer ${key}`;
      const req = request({ host: '127.0.0.1', port, path: PATHS[api], method: 'POST', headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200 || (stream && !text.includes(': receipt '))) return reject(new Error(`${api}: ${res.statusCode} ${text.slice(0, 200)}`));
          resolve(stream ? text.split(api === 'chat' ? '"content":"t' : '"text_delta","text":"t').length - 1 : 0);
        });
      });
      req.on('error', reject);
      req.end(body);
    });

  /** `count` requests at CONCURRENCY; Sigil's CPU in µs, and the token events received. */
  const run = async (api: Api, stream: boolean, count: number): Promise<{ cpuUs: number; events: number }> => {
    let next = 0;
    let events = 0;
    const before = cpuMicros(sigil.pids());
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < count) {
          next++;
          // Awaited first: `events += await ...` would read `events` before the wait and lose the other workers' counts.
          const received = await once(api, stream);
          events += received;
        }
      }),
    );
    return { cpuUs: cpuMicros(sigil.pids()) - before, events };
  };

  for (const api of ['chat', 'messages'] as const) {
    await run(api, false, 300);
    await run(api, true, 30);
  }
  const perRequest: Record<Api, number[]> = { chat: [], messages: [] };
  const perEvent: Record<Api, number[]> = { chat: [], messages: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    const order: Api[] = round % 2 === 1 ? ['chat', 'messages'] : ['messages', 'chat'];
    for (const api of order) {
      const json = await run(api, false, REQUESTS);
      perRequest[api].push(json.cpuUs / REQUESTS);
      const streamed = await run(api, true, STREAMS);
      if (streamed.events !== STREAMS * TOKENS) throw new Error(`${api}: ${streamed.events} token events, expected ${STREAMS * TOKENS}`);
      perEvent[api].push(streamed.cpuUs / streamed.events);
      log(`round ${round} ${api}: ${(json.cpuUs / REQUESTS).toFixed(0)} µs a JSON request, ${(streamed.cpuUs / streamed.events).toFixed(1)} µs a stream event`);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  process.stdout.write(
    `${describeMachine()}; Sigil ${sigilCommit()}; ${REQUESTS} JSON requests and ${STREAMS} streams of ${TOKENS} token events a round, ` +
      `concurrency ${CONCURRENCY}, receipts on every request, ${ROUNDS} rounds alternating (median, range)\n\n` +
      '| | µs CPU a JSON request | µs CPU a stream event (receipts amortised) |\n|---|---|---|\n' +
      (['chat', 'messages'] as const)
        .map(
          (api) =>
            `| ${PATHS[api]} | ${median(perRequest[api]).toFixed(0)} (${Math.min(...perRequest[api]).toFixed(0)}-${Math.max(...perRequest[api]).toFixed(0)}) | ` +
            `${median(perEvent[api]).toFixed(1)} (${Math.min(...perEvent[api]).toFixed(1)}-${Math.max(...perEvent[api]).toFixed(1)}) |`,
        )
        .join('\n') +
      '\n',
  );
  agent.destroy();
  await sigil.stop();
  return 0;
}

runBenchmark(main, log);
