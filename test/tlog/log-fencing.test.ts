import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { hash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger/logger.ts';
import { LogFolderBusy, lockLogFolder } from '../../src/tlog/folder-lock.ts';
import { TransparencyLog } from '../../src/tlog/transparency-log.ts';
import { killChild } from '../support/kill-child.ts';
import { startTestEngine } from '../support/test-engine.ts';
import { startTestSigil } from '../support/sigil.ts';
import { startSigilProcess } from '../support/sigil-process.ts';
import { waitFor } from '../support/wait-for.ts';

const work = mkdtempSync(join(tmpdir(), 'sigil-tlog-fencing-'));
const HOLDER = [
  '--import',
  pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href,
  fileURLToPath(new URL('../support/log-folder-holder.ts', import.meta.url)),
];
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const child of children) await killChild(child);
});

/** The holder process and every line it printed so far. */
function holder(command: string, args: string[]): { child: ChildProcess; lines: string[] } {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const lines: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => lines.push(line));
  return { child, lines };
}

const STALE_MS = 2000;
const open = (dir: string) =>
  TransparencyLog.open({ dir, originPrefix: 'test.example', batchMs: 1000, idsKept: 1, logger: createLogger('silent'), lockTiming: { staleMs: STALE_MS } });

describe('a lock that fences', () => {
  it('a holder paused past the takeover stops appending when it resumes and refuses with log_unavailable; the new holder keeps its history', async () => {
    const dir = mkdtempSync(join(work, 'paused-'));
    const paused = holder(process.execPath, [...HOLDER, dir, String(STALE_MS)]);
    await waitFor('three entries on disk', () => paused.lines.length >= 3);
    paused.child.kill('SIGSTOP');
    const durableBefore = paused.lines.filter((l) => l.startsWith('durable ')).length;
    await waitFor('the paused holder’s lock to go stale', () => Date.now() - statSync(join(dir, 'lock')).mtimeMs > STALE_MS, { timeoutMs: 60_000 });

    const next = await open(dir);
    const takenOver = next.checkpoint.size;
    // Everything the paused holder said was on disk is in the log the new holder took over.
    expect(takenOver).toBeGreaterThanOrEqual(durableBefore);
    const ours = Array.from({ length: 5 }, (_, i) => ({ index: next.append(`new holder ${i}`), entry: hash('sha256', `new holder ${i}`) }));
    await next.integrate();
    const printedBeforeResume = paused.lines.length;
    paused.child.kill('SIGCONT');
    await waitFor('the resumed holder to refuse', () => paused.lines.at(-1)?.startsWith('refused ') === true);
    // It may still report an entry made durable before it was paused (the line was in the pipe, or its report was
    // due when the stop came); never one past what the new holder took over, and then it refuses.
    const afterResume = paused.lines.slice(printedBeforeResume);
    expect(afterResume.at(-1)).toBe('refused log_unavailable');
    for (const line of afterResume.slice(0, -1)) expect(Number(/^durable (\d+)$/.exec(line)?.[1])).toBeLessThan(takenOver);
    await waitFor('the resumed holder to exit', () => paused.child.exitCode !== null);

    // The lock is still the new holder's (the resumed one neither refreshed nor removed it), and its entries are where it put them.
    expect(JSON.parse(readFileSync(join(dir, 'lock'), 'utf8'))).toMatchObject({ pid: process.pid, host: hostname() });
    const size = next.checkpoint.size;
    await next.close();
    const reopened = await open(dir);
    expect(reopened.checkpoint.size).toBe(size);
    for (const { index, entry } of ours) expect(reopened.inclusion(index)!.entry.toString('hex')).toBe(entry);
    await reopened.close();
  });

  it('a Sigil whose log folder was taken over answers requests that need a receipt with 503 log_unavailable, and hands out none', async () => {
    const engine = await startTestEngine({ modelNames: ['m1'] });
    const dir = mkdtempSync(join(work, 'sigil-'));
    const sigil = await startTestSigil({
      upstreams: { main: { url: engine.baseUrl } },
      models: [{ id: 'm1' }],
      config: { brand: 'Acme', transparency_log: { dir, batch_ms: 50 }, log: { level: 'silent' } },
    });
    try {
      const chat = () =>
        fetch(`${sigil.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
          body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hello' }] }),
        });
      expect((await chat()).headers.get('x-acme-log-index')).toBe('0');
      // Another Sigil's lock, as a takeover writes it: another token.
      const other = JSON.stringify({ pid: process.pid, host: hostname(), token: 'another start', since: new Date().toISOString() });
      writeFileSync(join(dir, 'lock'), other);
      const refused = await chat();
      expect(refused.status).toBe(503);
      expect(refused.headers.get('x-acme-receipt')).toBeNull();
      expect(((await refused.json()) as { error: unknown }).error).toEqual({
        message:
          "This server no longer keeps its transparency log (another Sigil took the log folder over), so it gives no receipt the log would not hold. Retry: the service's other instance answers.",
        type: 'service_unavailable',
        param: null,
        code: 'log_unavailable',
      });
      expect((await chat()).status).toBe(503);
      await sigil.close();
      // The close neither removed nor rewrote the other Sigil's lock.
      expect(readFileSync(join(dir, 'lock'), 'utf8')).toBe(other);
    } finally {
      await sigil.close();
      await engine.close();
    }
  });

  it('with workers, the refusal travels from the primary to the worker that took the request: 503 log_unavailable', async () => {
    const engine = await startTestEngine({ modelNames: ['m'] });
    const dir = mkdtempSync(join(work, 'workers-'));
    const sigil = await startSigilProcess(engine.baseUrl, { brand: 'Acme', workers: 2, transparency_log: { dir, batch_ms: 50 } });
    try {
      const chat = () =>
        fetch(`${sigil.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello' }] }),
        });
      expect((await chat()).headers.get('x-acme-log-index')).toBe('0');
      writeFileSync(join(dir, 'lock'), JSON.stringify({ pid: process.pid, host: hostname(), token: 'another start', since: new Date().toISOString() }));
      for (let i = 0; i < 2; i++) {
        const refused = await chat();
        expect(refused.status).toBe(503);
        expect(((await refused.json()) as { error: { code: string; type: string } }).error).toMatchObject({
          code: 'log_unavailable',
          type: 'service_unavailable',
        });
      }
    } finally {
      // SIGTERM: the primary stops its workers with it.
      sigil.child.kill('SIGTERM');
      await sigil.exited;
      await engine.close();
    }
  });

  it('a holder of another pid namespace on this host name does not count as ended because its pid is not seen here; only a silent lock is taken over', () => {
    const dir = mkdtempSync(join(work, 'pidns-'));
    const gone = Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout);
    const lock = { pid: gone, host: hostname(), pidns: 'pid:[4026531000]', token: 'a container', since: '2026-12-06T00:00:00.000Z' };
    writeFileSync(join(dir, 'lock'), JSON.stringify(lock));
    expect(() => lockLogFolder(dir, { staleMs: STALE_MS })).toThrow(
      new LogFolderBusy(
        `${dir} is kept by the Sigil with pid ${gone} on host ${hostname()} (another pid namespace, pid:[4026531000]) (since 2026-12-06T00:00:00.000Z): two Sigils appending to one log would fork it. Stop the other one or give this one its own transparency_log.dir; a lock nobody refreshes for 2 s is taken over`,
      ),
    );
    expect(JSON.parse(readFileSync(join(dir, 'lock'), 'utf8'))).toEqual(lock);
  });

  it('a real holder in a new pid namespace (unshare -p) records it, and its folder is refused while it runs', async () => {
    const dir = mkdtempSync(join(work, 'unshare-'));
    const contained = holder('unshare', ['-p', '-f', '--kill-child', process.execPath, ...HOLDER, dir, String(60_000)]);
    await waitFor('the contained holder to write an entry', () => contained.lines.length >= 1);
    const recorded = JSON.parse(readFileSync(join(dir, 'lock'), 'utf8')) as { pid: number; pidns: string };
    expect(recorded.pidns).toMatch(/^pid:\[\d+\]$/);
    expect(recorded.pidns).not.toBe(readlinkSync('/proc/self/ns/pid'));
    expect(recorded.pid).toBe(1);
    expect(() => lockLogFolder(dir, { staleMs: 60_000 })).toThrow(LogFolderBusy);
    await killChild(contained.child);
    expect(existsSync(join(dir, 'lock'))).toBe(true);
  });
});
