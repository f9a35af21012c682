import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger/logger.ts';
import { TransparencyLog } from '../../src/tlog/transparency-log.ts';
import { runSigilCli } from '../support/cli.ts';
import { freePort } from '../support/free-port.ts';
import { waitFor } from '../support/wait-for.ts';
import { startTestEngine } from '../support/test-engine.ts';
import { startTestSigil } from '../support/sigil.ts';
import { killChild } from '../support/kill-child.ts';

const logger = createLogger('silent');
const open = (dir: string) => TransparencyLog.open({ dir, originPrefix: 'mirror.example', batchMs: 1000, idsKept: 10, logger });
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const child of children) await killChild(child);
});

/** Every file under `dir`/tile, relative, sorted. */
function tileFiles(dir: string): string[] {
  return readdirSync(join(dir, 'tile'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

/** `python3 -m http.server` over `dir` on a free loopback port: a static server that is not Sigil. */
async function staticServer(dir: string): Promise<string> {
  const port = await freePort();
  const child = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', dir], { stdio: 'ignore' });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await waitFor('the static server to answer', async () => (await fetch(`${url}/checkpoint`)).ok);
  return url;
}

describe('the log folder is a complete tlog-tiles log on disk', () => {
  it('writes the partial tiles of each checkpoint, and keeps only the newest partial of each tile', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-mirror-'));
    const log = await open(dir);
    for (let i = 0; i < 300; i++) log.append(`receipt-${i}`);
    await log.integrate();
    expect(tileFiles(dir)).toEqual(['tile/0/000', 'tile/0/001.p/44', 'tile/1/000.p/1', 'tile/entries/000', 'tile/entries/001.p/44']);
    for (let i = 300; i < 600; i++) log.append(`receipt-${i}`);
    await log.close();
    expect(tileFiles(dir)).toEqual([
      'tile/0/000',
      'tile/0/001',
      'tile/0/002.p/88',
      'tile/1/000.p/2',
      'tile/entries/000',
      'tile/entries/001',
      'tile/entries/002.p/88',
    ]);
    expect(readFileSync(join(dir, 'tile/0/002.p/88')).equals(log.tile({ level: 0, index: 2, width: 88 })!)).toBe(true);
    expect(readFileSync(join(dir, 'tile/1/000.p/2')).equals(log.tile({ level: 1, index: 0, width: 2 })!)).toBe(true);
  });

  it('reopens a folder that holds its partial tiles, and rewrites one that a crash left wider than the entries', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-mirror-'));
    const log = await open(dir);
    for (let i = 0; i < 300; i++) log.append(`receipt-${i}`);
    await log.close();
    const files = tileFiles(dir);
    // What a crash between two writes leaves: a narrower copy not yet deleted, a partial tile whose entries never reached the disk.
    writeFileSync(join(dir, 'tile/0/001.p/10'), readFileSync(join(dir, 'tile/0/001.p/44')).subarray(0, 10 * 32));
    writeFileSync(join(dir, 'tile/0/001.p/60'), Buffer.alloc(60 * 32, 7));
    rmSync(join(dir, 'tile/1/000.p/1'));
    const again = await open(dir);
    expect(again.checkpoint.size).toBe(300);
    expect(tileFiles(dir)).toEqual(files);
    await again.close();
  });

  it('a plain static server (python3 -m http.server) over the folder passes `sigil log verify`', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-mirror-'));
    const log = await open(dir);
    for (let i = 0; i < 70_000; i++) log.append(`receipt-${i}`);
    await log.close();
    const url = await staticServer(dir);
    expect((await fetch(`${url}/tile/1/001.p/17`)).status).toBe(200);
    const state = join(dir, '..', `${dir.split('/').pop()}-seen.json`);
    const run = await runSigilCli('log', 'verify', url, '--log-key', log.key.vkey, '--witnesses', '0', '--state', state);
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/^PASS log\.tiles — all 70000 entries are 32-byte receipt hashes, and the 551 tiles and bundles hash to the checkpoint's root/m);
    expect(run.stdout).toMatch(/^verified with waivers: 4 checks passed; 1 waived \(log.witnesses\)$/m);
    expect(run.code).toBe(0);
  }, 180_000);
});

describe('entry bundles over HTTP', () => {
  it('are sent gzipped to a client that accepts gzip, and as they are to one that does not', async () => {
    const engine = await startTestEngine({ modelNames: ['m1'] });
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-mirror-'));
    const sigil = await startTestSigil({
      upstreams: { main: { url: engine.baseUrl } },
      models: [{ id: 'm1' }],
      config: { brand: 'Acme', transparency_log: { dir, batch_ms: 50 } },
    });
    try {
      const res = await fetch(`${sigil.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
        body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'log me' }] }),
      });
      expect(res.status).toBe(200);
      await waitFor('the entry to be integrated', async () => (await fetch(`${sigil.url}/v1/log/tile/entries/000.p/1`)).ok);
      const onDisk = readFileSync(join(dir, 'tile/entries/000.p/1'));
      const raw = await rawGet(`${sigil.url}/v1/log/tile/entries/000.p/1`, {});
      expect({ encoding: raw.headers['content-encoding'], body: raw.body.equals(onDisk) }).toEqual({ encoding: undefined, body: true });
      const gzipped = await rawGet(`${sigil.url}/v1/log/tile/entries/000.p/1`, { 'accept-encoding': 'gzip' });
      expect({ encoding: gzipped.headers['content-encoding'], vary: gzipped.headers.vary }).toEqual({ encoding: 'gzip', vary: 'Accept-Encoding' });
      expect(gunzipSync(gzipped.body).equals(onDisk)).toBe(true);
      const tile = await rawGet(`${sigil.url}/v1/log/tile/0/000.p/1`, { 'accept-encoding': 'gzip' });
      expect(tile.headers['content-encoding']).toBe(undefined);
    } finally {
      await sigil.close();
      await engine.close();
    }
  });
});

/** A GET whose body is not decoded (fetch would gunzip it and hide the encoding). */
async function rawGet(url: string, headers: Record<string, string>): Promise<{ headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
    })
      .on('error', reject)
      .end();
  });
}
