import { execFileSync } from 'node:child_process';
import { hash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger/logger.ts';
import { TransparencyLog } from '../../src/tlog/transparency-log.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startSigilProcess } from '../support/sigil-process.ts';
import { waitFor } from '../support/wait-for.ts';

let engine: TestEngine;
const work = mkdtempSync(join(tmpdir(), 'sigil-tlog-faults-'));

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1', 'm'] });
});
afterAll(async () => {
  await engine.close();
});

async function chat(url: string, key: string, content: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
    body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content }] }),
  });
}

/** A small file system of its own (tmpfs), so the log's disk can be filled or made read-only without touching the machine's. */
function smallDisk(): { path: string; remount(option: 'ro' | 'rw'): void; unmount(): void } {
  const path = mkdtempSync(join(work, 'disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', path]);
  return {
    path,
    remount: (option) => execFileSync('mount', ['-o', `remount,${option}`, path]),
    unmount: () => execFileSync('umount', [path]),
  };
}

/** Writes a file until the disk is full; returns its path. */
function fill(dir: string): string {
  const path = join(dir, 'filler');
  const chunk = Buffer.alloc(4096);
  writeFileSync(path, '');
  try {
    for (;;) writeFileSync(path, chunk, { flag: 'a' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  }
  return path;
}

describe('faults lose nothing a client holds', () => {
  it('kill -9 in the middle of a batch: every receipt handed out with a log index is in the log the next start recovers', async () => {
    const dir = join(mkdtempSync(join(work, 'killed-')), 'log');
    // One checkpoint every 10 s: the kill comes before any, so only entries written as their receipts left survive it.
    const sigil = await startSigilProcess(engine.baseUrl, { brand: 'Acme', transparency_log: { dir, batch_ms: 10_000 } });
    const held: Array<{ index: number; receipt: string }> = [];
    // Settled as they end: the kill fails the ones in flight, which must not surface as unhandled rejections meanwhile.
    const requests = Promise.allSettled(
      Array.from({ length: 40 }, async (_, i) => {
        const res = await fetch(`${sigil.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `request ${i}` }] }),
        });
        await res.arrayBuffer();
        held.push({ index: Number(res.headers.get('x-acme-log-index')), receipt: res.headers.get('x-acme-receipt')! });
      }),
    );
    await waitFor('ten receipts handed out', () => held.length >= 10);
    sigil.child.kill('SIGKILL');
    await sigil.exited;
    await requests;

    const recovered = await TransparencyLog.open({
      dir,
      statePath: `${dir}.state`,
      originPrefix: 'x',
      batchMs: 1000,
      idsKept: 1,
      logger: createLogger('silent'),
    });
    try {
      expect(recovered.checkpoint.size).toBeGreaterThanOrEqual(held.length);
      for (const { index, receipt } of held) expect(recovered.inclusion(index)?.entry.toString('hex')).toBe(hash('sha256', receipt));
    } finally {
      await recovered.close();
    }
  });

  it('a full disk: a receipt that cannot be logged is a 503 log_unavailable, no receipt; with space again the log goes on and a restart extends it', async () => {
    const disk = smallDisk();
    let sigil: TestSigil | undefined;
    try {
      const dir = join(disk.path, 'log');
      const start = () =>
        startTestSigil({
          upstreams: { main: { url: engine.baseUrl } },
          models: [{ id: 'm1' }],
          config: { brand: 'Acme', transparency_log: { dir, state: join(work, `full-${Date.now()}.state`), batch_ms: 50 }, log: { level: 'silent' } },
        });
      sigil = await start();
      expect((await chat(sigil.url, sigil.key, 'before')).headers.get('x-acme-log-index')).toBe('0');
      const filler = fill(disk.path);
      const refused = await chat(sigil.url, sigil.key, 'disk full');
      expect(refused.status).toBe(503);
      expect(refused.headers.get('x-acme-receipt')).toBeNull();
      expect(((await refused.json()) as { error: unknown }).error).toEqual({
        message: 'The transparency log could not write this receipt to disk, so no receipt is given. Retry later.',
        type: 'service_unavailable',
        param: null,
        code: 'log_unavailable',
      });
      rmSync(filler);
      const after = await chat(sigil.url, sigil.key, 'space again');
      expect(after.status).toBe(200);
      // The refused request's entry took index 1 and is written now: the log holds an entry nobody holds a receipt for, never the reverse.
      expect(after.headers.get('x-acme-log-index')).toBe('2');
      await sigil.close();
      sigil = await start();
      const checkpoint = await (await fetch(`${sigil.url}/v1/log/checkpoint`)).text();
      expect(checkpoint.split('\n')[1]).toBe('3');
    } finally {
      await sigil?.close();
      disk.unmount();
    }
  });

  it('a read-only folder: 503 log_unavailable while it lasts; a start on it refuses, saying what to do; writable again, the next start extends the log', async () => {
    const disk = smallDisk();
    let sigil: TestSigil | undefined;
    try {
      const dir = join(disk.path, 'log');
      mkdirSync(dir);
      const start = () =>
        startTestSigil({
          upstreams: { main: { url: engine.baseUrl } },
          models: [{ id: 'm1' }],
          config: { brand: 'Acme', transparency_log: { dir, state: join(work, `ro-${Date.now()}.state`), batch_ms: 50 }, log: { level: 'silent' } },
        });
      sigil = await start();
      expect((await chat(sigil.url, sigil.key, 'before')).headers.get('x-acme-log-index')).toBe('0');
      disk.remount('ro');
      const refused = await chat(sigil.url, sigil.key, 'read-only');
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('log_unavailable');
      await sigil.close().catch(() => undefined);
      sigil = undefined;
      await expect(start()).rejects.toThrow(
        new RegExp(
          `^transparency_log: cannot write the log folder ${dir} \\(EROFS: .*\\)\\. Free space or make it writable, then start again: the log on disk is as the last run left it, and the next start extends it`,
        ),
      );
      disk.remount('rw');
      sigil = await start();
      expect((await chat(sigil.url, sigil.key, 'writable again')).headers.get('x-acme-log-index')).toBe('1');
    } finally {
      await sigil?.close().catch(() => undefined);
      disk.unmount();
    }
  });
});
