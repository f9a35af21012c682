import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { attestedLog } from '../support/transparency-log.ts';
import { fetchCheckpoint } from '../../src/verify/tlog/log-client.ts';

let engine: TestEngine;
const started: TestSigil[] = [];

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
});
afterAll(async () => {
  for (const s of started) await s.close().catch(() => undefined);
  await engine.close();
});

async function start(dir: string): Promise<TestSigil> {
  const sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1' }],
    config: { transparency_log: { dir, batch_ms: 50 }, log: { level: 'silent' } },
  });
  started.push(sigil);
  return sigil;
}

describe('one Sigil keeps a log folder', () => {
  it('refuses a second Sigil on a folder whose Sigil runs, naming it; the folder is free again once that one stops', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-lock-'));
    const first = await start(dir);
    const { log } = await attestedLog(first.url);
    await expect(start(dir)).rejects.toThrow(
      new RegExp(
        `transparency_log: ${dir} is kept by the Sigil with pid ${process.pid} on host ${hostname()} \\(since [^)]+\\): two Sigils appending to one log would fork it`,
      ),
    );
    // The refused start changed nothing: the first one still serves its log.
    expect((await fetchCheckpoint(log)).origin).toBe(log.origin);
    await first.close();
    expect(existsSync(join(dir, 'lock'))).toBe(false);
    const second = await start(dir);
    expect((await attestedLog(second.url)).log.origin).toBe(log.origin);
    await second.close();
  });

  it('takes over a lock left by a Sigil of this host that no longer runs (a crash), or untouched for 30 s; refuses a live one of another host', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-stale-'));
    // The pid of a process that ran and ended.
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
    writeFileSync(join(dir, 'lock'), JSON.stringify({ pid: Number(gone), host: hostname(), since: '2026-11-28T00:00:00.000Z' }));
    const sigil = await start(dir);
    expect(JSON.parse(readFileSync(join(dir, 'lock'), 'utf8'))).toMatchObject({ pid: process.pid, host: hostname() });
    await sigil.close();

    // Another host's Sigil (a shared volume): whether it runs cannot be seen, only whether it still touches its lock.
    const other = JSON.stringify({ pid: Number(gone), host: 'another-host', since: '2026-11-28T00:00:00.000Z' });
    writeFileSync(join(dir, 'lock'), other);
    await expect(start(dir)).rejects.toThrow(/is kept by the Sigil with pid \d+ on host another-host .*a lock nobody refreshes for 30 s is taken over/);
    const longAgo = new Date(Date.now() - 31_000);
    utimesSync(join(dir, 'lock'), longAgo, longAgo);
    const after = await start(dir);
    expect(JSON.parse(readFileSync(join(dir, 'lock'), 'utf8'))).toMatchObject({ pid: process.pid, host: hostname() });
    await after.close();
  });
});
