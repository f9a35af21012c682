/**
 * What EHBP's cryptography costs per JSON request in Sigil's process, at a git revision (A) and in the working
 * tree (B), side by side in one process: HPKE set-up (decapsulation, key schedule, the two exports), the
 * response keys, opening the sealed body and sealing one answer frame, as `EhbpExchange` does them. Requests
 * are sealed by the npm `ehbp` client before each timed pass; CPU is the process's (all threads, so
 * WebCrypto's thread pool counts). Rounds alternate which side goes first.
 *
 *   npx tsx bench/ehbp-setup.ts [--base e6e4cda] [--requests 300] [--rounds 5]
 *
 * The revision's `src/` is exported with `git archive` beside a link to this tree's node_modules, so it runs
 * on this tree's packages (a revision that imports a package this tree lacks cannot be measured this way).
 */
import { execSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { Identity } from 'ehbp';
import { ROOT } from './peers.ts';

const { values } = parseArgs({
  options: { base: { type: 'string', default: 'e6e4cda' }, requests: { type: 'string', default: '300' }, rounds: { type: 'string', default: '5' } },
});
const REQUESTS = Number(values.requests);
const ROUNDS = Number(values.rounds);

interface Exchange {
  open(body: Buffer, max: number): Promise<Buffer>;
  sealer: { seal(chunk: Uint8Array): Buffer };
}
interface Side {
  label: string;
  key: { keyConfig: Uint8Array };
  setup(key: unknown, enc: Uint8Array): Promise<Exchange>;
}

async function sideFrom(root: string, label: string): Promise<Side> {
  const open = (await import(pathToFileURL(join(root, 'src/ehbp/request-open.ts')).href)) as { EhbpExchange: { setup: Side['setup'] } };
  const keys = (await import(pathToFileURL(join(root, 'src/ehbp/server-key.ts')).href)) as { makeEhbpServerKey(): Promise<Side['key']> };
  return { label, key: await keys.makeEhbpServerKey(), setup: (key, enc) => open.EhbpExchange.setup(key, enc) };
}

const dir = mkdtempSync(join(tmpdir(), 'sigil-ehbp-setup-'));
const commit = execSync(`git rev-parse --short ${values.base}`, { cwd: ROOT, encoding: 'utf8' }).trim();
execSync(`git archive ${commit} src | tar -x -C ${JSON.stringify(dir)}`, { cwd: ROOT });
symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));

const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello in one short sentence, please.' }], max_tokens: 16 });
const answer = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there.' }, finish_reason: 'stop' }],
  }),
);

async function sealed(keyConfig: Uint8Array): Promise<{ enc: Buffer; body: Buffer }[]> {
  const identity = await Identity.unmarshalPublicConfig(keyConfig);
  const out = [];
  for (let i = 0; i < REQUESTS; i++) {
    const { request } = await identity.encryptRequestWithContext(new Request('http://sigil/v1/chat/completions', { method: 'POST', body }));
    out.push({ enc: Buffer.from(request.headers.get('ehbp-encapsulated-key')!, 'hex'), body: Buffer.from(await request.arrayBuffer()) });
  }
  return out;
}

/** CPU µs per request of one pass. */
async function pass(side: Side): Promise<number> {
  const requests = await sealed(side.key.keyConfig);
  const cpu0 = process.cpuUsage();
  for (const r of requests) {
    const exchange = await side.setup(side.key, r.enc);
    await exchange.open(r.body, 1 << 20);
    exchange.sealer.seal(answer);
  }
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / REQUESTS;
}

try {
  const a = await sideFrom(dir, `${values.base} (${commit})`);
  const b = await sideFrom(ROOT, 'working tree');
  await pass(a);
  await pass(b);
  const rows: { a: number; b: number }[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const row = { a: 0, b: 0 };
    if (round % 2 === 0) [row.a, row.b] = [await pass(a), await pass(b)];
    else [row.b, row.a] = [await pass(b), await pass(a)];
    rows.push(row);
    process.stderr.write(`round ${round + 1}/${ROUNDS}: A ${row.a.toFixed(0)} µs, B ${row.b.toFixed(0)} µs\n`);
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
  const ratios = rows.map((r) => r.b / r.a);
  console.log(`EHBP cryptography per JSON request, in one process, ${ROUNDS} interleaved rounds of ${REQUESTS} requests\n`);
  console.log('| side | CPU µs per request (median) |');
  console.log('|---|---|');
  console.log(`| A ${a.label} | ${median(rows.map((r) => r.a)).toFixed(0)} |`);
  console.log(`| B ${b.label} | ${median(rows.map((r) => r.b)).toFixed(0)} |`);
  console.log(`\nB/A per round: ${median(ratios).toFixed(2)} (${range(ratios)})`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
