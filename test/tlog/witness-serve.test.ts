import { spawn, type ChildProcess } from 'node:child_process';
import { createPublicKey, verify } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger/logger.ts';
import { TransparencyLog } from '../../src/tlog/transparency-log.ts';
import { signNote } from '../../src/tlog/log-key.ts';
import { checkpointText } from '../../src/protocol/tlog/checkpoint.ts';
import { runSigilCli, SIGIL_FROM_SOURCES } from '../support/cli.ts';
import { killChild } from '../support/kill-child.ts';
import { waitFor } from '../support/wait-for.ts';

const logger = createLogger('silent');
const work = mkdtempSync(join(tmpdir(), 'sigil-witness-serve-'));
let log: TransparencyLog;
let other: TransparencyLog;
let vkey: string;
let witness: { child: ChildProcess; url: string } | undefined;

/** `sigil witness serve` on a free loopback port; resolves with its URL once it listens. */
async function serveWitness(followed = log.key.vkey, state = join(work, 'state.json')): Promise<{ child: ChildProcess; url: string }> {
  const args = ['witness', 'serve', '--key', join(work, 'w1.json'), '--state', state, '--log', followed, '--listen', '127.0.0.1:0'];
  const child = spawn(process.execPath, [...SIGIL_FROM_SOURCES, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const url = await waitFor('the witness to listen', () => /listening on (http:\/\/\S+)/.exec(out)?.[1]);
  return { child, url };
}

/** The request body as tlog-witness words it: `old N`, proof lines, an empty line, the checkpoint. */
const body = (old: number, proof: string[], note: string) => `old ${old}\n${proof.map((p) => `${p}\n`).join('')}\n${note}`;

async function add(old: number, proof: string[], note: string, url = witness!.url): Promise<{ status: number; type: string | null; text: string }> {
  const res = await fetch(`${url}/add-checkpoint`, { method: 'POST', body: body(old, proof, note) });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

/** Checks a cosignature/v1 line from the tlog-cosignature text alone: key ID, timestamp, Ed25519 over the header, time line and checkpoint. */
function cosignatureVerifies(line: string, checkpointNote: string): { name: string; timestamp: number } | undefined {
  const [, name, vkeyId, material] = /^([^+]+)\+([0-9a-f]{8})\+(.+)$/.exec(vkey) as unknown as [string, string, string, string];
  const m = /^\u2014 (\S+) (\S+)\n$/.exec(line);
  if (m === null || m[1] !== name) return undefined;
  const sig = Buffer.from(m[2]!, 'base64');
  if (sig.subarray(0, 4).toString('hex') !== vkeyId || sig.length !== 4 + 8 + 64) return undefined;
  const timestamp = Number(sig.readBigUInt64BE(4));
  const text = checkpointNote.slice(0, checkpointNote.indexOf('\n\n') + 1);
  const raw = Buffer.from(material, 'base64');
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.subarray(1).toString('base64url') }, format: 'jwk' });
  return verify(null, Buffer.from(`cosignature/v1\ntime ${timestamp}\n${text}`), key, sig.subarray(12)) ? { name, timestamp } : undefined;
}

const proof = (from: number, to: number) => log.consistency(from, to)!.map((h) => h.toString('base64'));

beforeAll(async () => {
  log = await TransparencyLog.open({ dir: join(work, 'log'), originPrefix: 'serve.example', batchMs: 1000, idsKept: 10, logger });
  other = await TransparencyLog.open({ dir: join(work, 'other'), originPrefix: 'serve.example', batchMs: 1000, idsKept: 10, logger });
  const keygen = await runSigilCli('witness', 'keygen', '--name', 'witness.example/w1', '--key', join(work, 'w1.json'));
  expect(keygen.code).toBe(0);
  vkey = keygen.stdout.trim();
  witness = await serveWitness();
});

afterAll(async () => {
  await killChild(witness?.child);
  await log.close();
  await other.close();
});

describe('sigil witness serve: the C2SP tlog-witness API', () => {
  it('cosigns a first checkpoint from old size 0, a cosignature/v1 line that verifies under its printed key', async () => {
    for (let i = 0; i < 5; i++) log.append(`r${i}`);
    await log.integrate();
    const answer = await add(0, [], log.checkpoint.note);
    expect({ status: answer.status, type: answer.type }).toEqual({ status: 200, type: 'text/plain; charset=utf-8' });
    const signed = cosignatureVerifies(answer.text, log.checkpoint.note);
    expect(signed?.name).toBe('witness.example/w1');
    expect(Math.abs(signed!.timestamp - Date.now() / 1000)).toBeLessThan(60);
    expect(JSON.parse(readFileSync(join(work, 'state.json'), 'utf8'))).toEqual({ [log.origin]: { size: 5, root: expect.any(String) } });
  });

  it('answers 409 with the size it cosigned last (text/x.tlog.size) to a wrong old size, then cosigns with the right one and its proof', async () => {
    for (let i = 5; i < 300; i++) log.append(`r${i}`);
    await log.integrate();
    expect(await add(0, [], log.checkpoint.note)).toEqual({ status: 409, type: 'text/x.tlog.size', text: '5\n' });
    const answer = await add(5, proof(5, 300), log.checkpoint.note);
    expect(answer.status).toBe(200);
    expect(cosignatureVerifies(answer.text, log.checkpoint.note)).toBeDefined();
  });

  it('refuses what the specification says to refuse, and changes nothing', async () => {
    const before = readFileSync(join(work, 'state.json'), 'utf8');
    for (let i = 300; i < 310; i++) log.append(`r${i}`);
    await log.integrate();
    const good = proof(300, 310);
    const bad = [...good];
    bad[0] = Buffer.alloc(32, 1).toString('base64');
    expect((await add(300, bad, log.checkpoint.note)).status).toBe(422);
    expect((await add(311, [], log.checkpoint.note)).status).toBe(400);
    expect((await add(300, ['not base64!'], log.checkpoint.note)).status).toBe(400);
    // Another log's origin is unknown (404); this origin signed by another key is forbidden (403).
    for (let i = 0; i < 3; i++) other.append(`o${i}`);
    await other.integrate();
    expect((await add(0, [], other.checkpoint.note)).status).toBe(404);
    const forged = signNote(checkpointText(log.origin, 310, Buffer.alloc(32, 9)), other.key).replace(other.key.name, log.origin);
    expect((await add(300, good, forged)).status).toBe(403);
    // The log's own key signing another root at the size cosigned: a fork, refused with 409.
    const fork = signNote(checkpointText(log.origin, 300, Buffer.alloc(32, 9)), log.key);
    expect(await add(300, [], fork)).toEqual({ status: 409, type: 'text/x.tlog.size', text: '300\n' });
    expect((await fetch(`${witness!.url}/add-checkpoint`)).status).toBe(405);
    expect(readFileSync(join(work, 'state.json'), 'utf8')).toBe(before);
  });

  it('keeps its state across a kill -9: after a restart it still answers 409 with the last size and refuses a fork', async () => {
    await killChild(witness!.child);
    witness = await serveWitness();
    const fork = signNote(checkpointText(log.origin, 310, Buffer.alloc(32, 9)), log.key);
    expect(await add(0, [], fork)).toEqual({ status: 409, type: 'text/x.tlog.size', text: '300\n' });
    expect((await add(300, proof(300, 310), fork)).status).toBe(422);
    const answer = await add(300, proof(300, 310), log.checkpoint.note);
    expect(answer.status).toBe(200);
  });

  it('records one of two concurrent requests from the same old size, never both (the race the specification names)', async () => {
    for (let i = 310; i < 320; i++) log.append(`r${i}`);
    await log.integrate();
    const at320 = log.checkpoint.note;
    for (let i = 320; i < 330; i++) log.append(`r${i}`);
    await log.integrate();
    const answers = await Promise.all([add(310, proof(310, 320), at320), add(310, proof(310, 330), log.checkpoint.note)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
  });
});

describe('sigil witness serve against the test data of transparency-dev/witness (checkpoints and a proof that Sigil did not make)', () => {
  const data = JSON.parse(readFileSync(new URL('../vectors/transparency-dev-witness/monkeys-log.json', import.meta.url), 'utf8')) as {
    origin: string;
    log_vkey: string;
    init: string;
    init_other_log: string;
    next: string;
    proof_5_to_8_hex: string[];
  };

  it("cosigns the log's checkpoints of origin 'Log Checkpoint v0' (key monkeys) and checks their consistency proof", async () => {
    const other = await serveWitness(`${data.origin} ${data.log_vkey}`, join(work, 'monkeys-state.json'));
    try {
      expect((await add(0, [], data.init_other_log, other.url)).status).toBe(403);
      const first = await add(0, [], data.init, other.url);
      expect(first.status).toBe(200);
      expect(cosignatureVerifies(first.text, data.init)?.name).toBe('witness.example/w1');
      const proof = data.proof_5_to_8_hex.map((h) => Buffer.from(h, 'hex').toString('base64'));
      const bad = [...proof].reverse();
      expect((await add(5, bad, data.next, other.url)).status).toBe(422);
      const next = await add(5, proof, data.next, other.url);
      expect(next.status).toBe(200);
      expect(cosignatureVerifies(next.text, data.next)).toBeDefined();
      expect(await add(5, proof, data.next, other.url)).toEqual({ status: 409, type: 'text/x.tlog.size', text: '8\n' });
    } finally {
      await killChild(other.child);
    }
  });
});
