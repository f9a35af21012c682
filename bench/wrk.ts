/**
 * Saturation load from a native generator: wrk (Debian) when present, else autocannon (npm, pinned in
 * package-lock). Both keep `connections` requests in flight for `seconds` and report µs percentiles.
 */
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Target } from './load-client.ts';
import { hasTaskset } from './processes.ts';

export interface SaturationResult {
  requests: number;
  rps: number;
  errors: number;
  /** µs */
  p50: number;
  p99: number;
  max: number;
  tool: string;
}

export function wrkVersion(): string | undefined {
  const r = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  if (r.error !== undefined) return undefined;
  return /wrk (\S+)/.exec(r.stdout + r.stderr)?.[1] ?? 'unknown';
}

const lua = (s: string) => JSON.stringify(s); // a JSON string is a valid Lua string literal for ASCII text

function wrkScript(target: Target, body: string): string {
  const headers = Object.entries(target.headers)
    .map(([k, v]) => `wrk.headers[${lua(k)}] = ${lua(v)}`)
    .join('\n');
  return `wrk.method = "POST"
wrk.body = ${lua(body)}
${headers}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"errors":%d,"p50":%d,"p99":%d,"max":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
`;
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} exited ${code}: ${out.slice(-400)}`))));
  });
}

const pinned = (core: number, command: string, args: string[]): [string, string[]] =>
  hasTaskset ? ['taskset', ['-c', String(core), command, ...args]] : [command, args];

export async function saturate(
  dir: string,
  target: Target,
  body: string,
  connections: number,
  seconds: number,
  core: number,
  useWrk: boolean,
): Promise<SaturationResult> {
  const url = `${target.tls === undefined ? 'http' : 'https'}://${target.host}:${target.port}${target.path}`;
  if (useWrk) {
    const script = join(dir, `wrk-${target.port}.lua`);
    writeFileSync(script, wrkScript(target, body));
    const out = await run(...pinned(core, 'wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', script, url]));
    const line = out.split('\n').find((l) => l.startsWith('WRKJSON '));
    if (line === undefined) throw new Error(`wrk printed no result: ${out.slice(-400)}`);
    const r = JSON.parse(line.slice(8)) as { requests: number; duration_us: number; errors: number; p50: number; p99: number; max: number };
    return { requests: r.requests, rps: r.requests / (r.duration_us / 1e6), errors: r.errors, p50: r.p50, p99: r.p99, max: r.max, tool: 'wrk' };
  }
  const bin = createRequire(import.meta.url).resolve('autocannon/autocannon.js');
  const args = [bin, '-j', '-c', String(connections), '-d', String(seconds), '-m', 'POST', '-b', body];
  for (const [k, v] of Object.entries(target.headers)) args.push('-H', `${k}=${v}`);
  args.push(url);
  const out = await run(...pinned(core, process.execPath, args));
  const r = JSON.parse(out.slice(out.indexOf('{'))) as {
    requests: { total: number; average: number };
    duration: number;
    errors: number;
    non2xx: number;
    latency: { p50: number; p99: number; max: number };
  };
  return {
    requests: r.requests.total,
    rps: r.requests.total / r.duration,
    errors: r.errors + r.non2xx,
    p50: r.latency.p50 * 1000,
    p99: r.latency.p99 * 1000,
    max: r.latency.max * 1000,
    tool: 'autocannon',
  };
}
