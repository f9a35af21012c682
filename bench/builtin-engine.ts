/**
 * The built-in engine behind Sigil, measured side by side: tokens/s and time to first token of the
 * same streamed requests sent to the engine directly and through Sigil, interleaved; the engine's load
 * time; and the peak RSS of both processes.
 *
 *   npx tsx bench/builtin-engine.ts [--rounds 6] [--max-tokens 256]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { addKey } from '../src/auth/keys-file.ts';
import { ensureDemoModel } from '@sigil/engine/demo-model';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '6' }, 'max-tokens': { type: 'string', default: '256' } } });
const ROUNDS = Number(values.rounds);
const MAX_TOKENS = Number(values['max-tokens']);

const dir = mkdtempSync(join(tmpdir(), 'sigil-bench-engine-'));
const model = await ensureDemoModel(join(dir, 'demo.gguf'));
writeFileSync(
  join(dir, 'sigil.yaml'),
  stringify({ listen: { host: '127.0.0.1', port: 0 }, auth: { keys_file: 'keys' }, engine: { model: model.path, parallel: 1 } }),
);
const { key } = addKey(join(dir, 'keys'));

const started = Date.now();
const sigil = spawn(process.execPath, ['bin/sigil.js', 'serve', '--config', join(dir, 'sigil.yaml')], { stdio: ['ignore', 'pipe', 'inherit'] });
const { proxyUrl, engineUrl, loadMs } = await new Promise<{ proxyUrl: string; engineUrl: string; loadMs: number }>((resolve) => {
  let engineUrl = '';
  let loadMs = 0;
  createInterface({ input: sigil.stdout! }).on('line', (line) => {
    const entry = JSON.parse(line) as { msg?: string; url?: string; ms?: number };
    if (entry.msg === 'built-in engine started') [engineUrl, loadMs] = [entry.url!, entry.ms!];
    if (entry.msg === 'sigil listening') resolve({ proxyUrl: entry.url!, engineUrl, loadMs });
  });
});
const readyMs = Date.now() - started;

async function stream(base: string, auth: boolean): Promise<{ tokens: number; ttftMs: number; totalMs: number }> {
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({
      model: 'demo',
      messages: [{ role: 'user', content: 'Tell me a story.' }],
      stream: true,
      max_tokens: MAX_TOKENS,
      seed: 7,
      stream_options: { include_usage: true },
    }),
  });
  const reader = res.body!.getReader();
  let ttftMs = 0;
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
    if (ttftMs === 0 && text.includes('"content":"') && !text.endsWith('"content":""')) ttftMs = performance.now() - t0;
  }
  const usage = JSON.parse(
    text
      .split('\n\n')
      .filter((e) => e.includes('"usage":{'))[0]!
      .slice(6),
  ).usage as { completion_tokens: number };
  return { tokens: usage.completion_tokens, ttftMs, totalMs: performance.now() - t0 };
}

const vmHwmMiB = (pid: number) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const enginePid = Number(readFileSync(`/proc/${sigil.pid}/task/${sigil.pid}/children`, 'utf8').trim().split(/\s+/)[0]);

/** utime + stime of a process, in µs (clock ticks of 10 ms). */
const cpuUs = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
};

await stream(engineUrl, false);
const sigilCpuBefore = cpuUs(sigil.pid!);
const direct: Array<{ tokens: number; ttftMs: number; totalMs: number }> = [];
const proxied: typeof direct = [];
for (let i = 0; i < ROUNDS; i++) {
  // Interleaved, the order swapped every round, so drift of the machine hits both alike.
  if (i % 2 === 0) {
    direct.push(await stream(engineUrl, false));
    proxied.push(await stream(proxyUrl, true));
  } else {
    proxied.push(await stream(proxyUrl, true));
    direct.push(await stream(engineUrl, false));
  }
}

const sigilCpuUs = cpuUs(sigil.pid!) - sigilCpuBefore;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const tps = (runs: typeof direct) => runs.map((r) => (r.tokens / r.totalMs) * 1000);
const ratios = direct.map((d, i) => proxied[i]!.tokens / proxied[i]!.totalMs / (d.tokens / d.totalMs));
const report = {
  date: new Date().toISOString(),
  model: `demo (random weights, ${model.sha256.slice(0, 19)}...)`,
  max_tokens: MAX_TOKENS,
  rounds: ROUNDS,
  engine_load_ms: loadMs,
  start_to_ready_ms: readyMs,
  tokens_per_s: { direct: Math.round(median(tps(direct))), through_sigil: Math.round(median(tps(proxied))), ratio_median: Number(median(ratios).toFixed(3)) },
  ttft_ms: { direct: Number(median(direct.map((r) => r.ttftMs)).toFixed(2)), through_sigil: Number(median(proxied.map((r) => r.ttftMs)).toFixed(2)) },
  sigil_cpu_us_per_token: Math.round(sigilCpuUs / proxied.reduce((n, r) => n + r.tokens, 0)),
  cores: (await import('node:os')).availableParallelism(),
  peak_rss_mib: { sigil: Math.round(vmHwmMiB(sigil.pid!)), engine: Math.round(vmHwmMiB(enginePid)) },
};
console.log(JSON.stringify(report, null, 2));
sigil.kill('SIGTERM');
