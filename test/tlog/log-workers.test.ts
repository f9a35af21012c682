import { randomBytes } from 'node:crypto';
import { once as nextOutput } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSigilProcess, workerPids, type SigilProcess } from '../support/sigil-process.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { attestedLog, integrated } from '../support/transparency-log.ts';
import { once } from '../workers/fresh-connection.ts';
import { parseConfig } from '../../src/config/load.ts';
import { servingProcesses } from '../../src/config/workers.ts';
import { fetchCheckpoint, verifyLogConsistency, verifyReceiptInLog, verifyWholeLog, type TrustedLog } from '../../src/verify/tlog/log-client.ts';

let engine: TestEngine;
let sigil: SigilProcess | undefined;
const logDir = mkdtempSync(join(tmpdir(), 'sigil-tlog-workers-'));

/** Every request on a connection of its own, so the cluster hands each to the next worker in turn. */
const anyWorker = (async (input: string | URL, init?: RequestInit) => {
  const agent = new Agent({ pipelining: 0 });
  try {
    const res = await undiciFetch(String(input), { ...(init as object), dispatcher: agent });
    return new Response(await res.arrayBuffer(), { status: res.status, headers: Object.fromEntries(res.headers) });
  } finally {
    await agent.close();
  }
}) as typeof fetch;

const serve = () => startSigilProcess(engine.baseUrl, { workers: 2, transparency_log: { dir: logDir, batch_ms: 50 } });

async function trusted(s: SigilProcess): Promise<TrustedLog> {
  const { log } = await attestedLog(s.url);
  return { ...log, fetch: anyWorker };
}

const chat = (s: SigilProcess, stream: boolean) =>
  once(s.url, '/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'log me' }], stream }),
  });

/** The workers that answered requests of `route`, once `count` of them are in the log lines. */
async function workersServing(s: SigilProcess, route: string, count: number): Promise<number[]> {
  const served = () => s.logs.filter((l) => l.msg === 'request' && l.route === route).map((l) => l.worker as number);
  // Each wait ends with the next output of the primary, which carries its workers' log lines.
  while (served().length < count) await nextOutput(s.child.stdout!, 'data');
  return [...new Set(served())].sort();
}

async function stop(s: SigilProcess): Promise<void> {
  s.child.kill('SIGTERM');
  expect(await s.exited).toBe(0);
}

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
});

afterAll(async () => {
  if (sigil !== undefined && sigil.child.exitCode === null) {
    for (const pid of workerPids(sigil.child.pid!)) process.kill(pid, 'SIGKILL');
    sigil.child.kill('SIGKILL');
  }
  await engine.close();
});

describe('the transparency log with workers: 2', { timeout: 120_000 }, () => {
  /** Every receipt handed out, with the leaf index its response named (a stream's message receipt names none). */
  const receipts: Array<{ jws: string; index?: number }> = [];
  let log: TrustedLog;

  it('appends every receipt both workers sign, each under a leaf index of its own, and proves each one', async () => {
    sigil = await serve();
    log = await trusted(sigil);
    const sent = 8;
    for (let i = 0; i < sent; i++) {
      const stream = i % 2 === 1;
      const res = await chat(sigil, stream);
      expect(res.status).toBe(200);
      receipts.push({ jws: res.headers['x-service-receipt'] as string, index: Number(res.headers['x-service-log-index']) });
      if (stream) receipts.push({ jws: /: receipt (\S+)\n\n$/.exec(res.body)![1]! });
    }
    expect(await workersServing(sigil, '/v1/chat/completions', sent)).toEqual([1, 2]);
    const named = receipts.filter((r) => r.index !== undefined).map((r) => r.index!);
    expect(new Set(named).size).toBe(sent);

    const checkpoint = await integrated(log, receipts.length);
    expect(checkpoint.size).toBe(receipts.length);
    const indexes: number[] = [];
    for (const { jws, index } of receipts) {
      // By the index the response named, or by the receipt's id (the worker that answers need not be the one that signed).
      const found = await verifyReceiptInLog(log, jws, { ...(index === undefined ? {} : { index }), checkpoint });
      indexes.push(found.index);
    }
    expect(indexes.sort((a, b) => a - b)).toEqual(Array.from({ length: receipts.length }, (_, i) => i));
    expect((await verifyWholeLog(log)).entries).toBe(receipts.length);
  });

  it('serves one log from every worker: the same checkpoint, tiles and attestation binding whichever worker answers', async () => {
    const bodies = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const answer = await once(sigil!.url, '/v1/log/checkpoint');
      expect(answer.status).toBe(200);
      bodies.add(answer.body);
    }
    expect(bodies.size).toBe(1);
    expect(await workersServing(sigil!, '/v1/log/{resource}', 4)).toEqual([1, 2]);
    // A fresh attestation (made by the worker that answers) binds the same log as the start evidence.
    const start = JSON.parse((await once(sigil!.url, '/v1/verify/attestation')).body) as { binding: { transparency_log: { origin: string } } };
    expect(start.binding.transparency_log.origin).toBe(log.origin);
    for (let i = 0; i < 4; i++) {
      const answer = await once(sigil!.url, `/v1/verify/attestation?nonce=${randomBytes(32).toString('hex')}`);
      expect(answer.status).toBe(200);
      expect((JSON.parse(answer.body) as typeof start).binding.transparency_log).toEqual(start.binding.transparency_log);
    }
    const missing = await once(sigil!.url, '/v1/log/proof?index=999');
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body)).toMatchObject({ error: { code: 'log_entry_not_found', param: 'index' } });
  });

  it('keeps one history across a restart: the stored tree is extended under the same origin, consistent with the last checkpoint', async () => {
    const before = await fetchCheckpoint(log);
    await stop(sigil!);
    sigil = await serve();
    const again = await trusted(sigil);
    expect(again.origin).toBe(log.origin);
    expect(again.key.publicKey.equals(log.key.publicKey)).toBe(false);
    const res = await chat(sigil, false);
    expect(res.headers['x-service-log-index']).toBe(String(before.size));
    const after = await integrated(again, before.size + 1);
    await verifyLogConsistency(again, before, after);
    await verifyReceiptInLog(again, receipts[0]!.jws, { index: receipts[0]!.index!, checkpoint: after });
    await verifyReceiptInLog(again, res.headers['x-service-receipt'] as string, { index: before.size, checkpoint: after });
    await stop(sigil);
  });
});

describe('sizing sigil serve with a transparency log', () => {
  const config = (yaml: string) =>
    parseConfig(`auth: { keys_file: api-keys }\ncatalogue: models.yaml\nupstreams: { e: { url: 'http://127.0.0.1:8000/v1' } }\n${yaml}`, '/tmp/sigil.yaml');

  it('runs as many workers as without the log: one per core by default, or as many as `workers` says', () => {
    expect(servingProcesses(config('transparency_log: { dir: log }\n'), 4)).toBe(4);
    expect(servingProcesses(config('workers: 3\ntransparency_log: { dir: log }\n'), 4)).toBe(3);
  });
});
