import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger/logger.ts';
import { TransparencyLog } from '../../src/tlog/transparency-log.ts';
import { openCheckpoint } from '../../src/protocol/tlog/checkpoint.ts';
import { parseVerifierKey } from '../../src/protocol/tlog/note.ts';
import { startSpecWitness, type SpecWitness } from '../support/spec-witness.ts';
import { startTestEngine } from '../support/test-engine.ts';
import { startTestSigil } from '../support/sigil.ts';
import { attestedLog } from '../support/transparency-log.ts';
import { waitFor } from '../support/wait-for.ts';
import { runSigilCli, SIGIL_FROM_SOURCES } from '../support/cli.ts';
import { killChild } from '../support/kill-child.ts';
import { spawn } from 'node:child_process';
import { freePort } from '../support/free-port.ts';

const logger = createLogger('silent');
const witnesses: SpecWitness[] = [];

async function witness(name: string, options: { hang?: boolean; impostor?: boolean } = {}): Promise<SpecWitness> {
  const w = await startSpecWitness(name, options);
  witnesses.push(w);
  return w;
}

afterAll(async () => {
  for (const w of witnesses) await w.close();
});

function open(dir: string, targets: SpecWitness[], quorum: number, timeoutMs = 5000): Promise<TransparencyLog> {
  return TransparencyLog.open({
    dir,
    originPrefix: 'push.example',
    batchMs: 1000,
    idsKept: 10,
    logger,
    witnesses: { targets: targets.map((w) => ({ url: w.url, vkey: w.vkey })), quorum, timeoutMs },
  });
}

async function grow(log: TransparencyLog, n: number): Promise<void> {
  for (let i = 0; i < n; i++) log.append(`receipt-${log.checkpoint.size}-${i}`);
  await log.integrate();
  await log.witnessed();
}

describe('the log pushes each checkpoint to its witnesses (C2SP tlog-witness) and keeps the cosigned one', () => {
  it('collects both cosignatures and writes checkpoint.cosigned: the checkpoint, the log signature, then the witness lines', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-witness-push-'));
    const [a, b] = [await witness('witness.example/a'), await witness('witness.example/b')];
    const log = await open(dir, [a, b], 2);
    a.trust(log.key.vkey);
    b.trust(log.key.vkey);
    await grow(log, 5);
    await grow(log, 300);
    const cosigned = readFileSync(join(dir, 'checkpoint.cosigned'), 'utf8');
    expect(cosigned.startsWith(log.checkpoint.note)).toBe(true);
    expect(
      cosigned
        .slice(log.checkpoint.note.length)
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ')[1]),
    ).toEqual(['witness.example/a', 'witness.example/b']);
    const opened = openCheckpoint(cosigned, parseVerifierKey(log.key.vkey), log.origin, {
      witnesses: [parseVerifierKey(a.vkey), parseVerifierKey(b.vkey)],
      required: 2,
    });
    expect({ size: opened.size, cosigners: opened.cosigners.map((c) => c.name) }).toEqual({ size: 305, cosigners: ['witness.example/a', 'witness.example/b'] });
    // The second push came with the witness's old size and a consistency proof the witness checked.
    expect(a.statuses).toEqual([200, 200]);
    expect(log.cosignedCheckpoint).toBe(cosigned);
    await log.close();
  });

  it('after a restart, follows the 409 to the size a witness cosigned and proves consistency from there', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-witness-push-'));
    const a = await witness('witness.example/a');
    const first = await open(dir, [a], 1);
    a.trust(first.key.vkey);
    await grow(first, 10);
    await first.close();
    const again = await open(dir, [a], 1);
    a.trust(again.key.vkey);
    await grow(again, 7);
    expect(a.statuses).toEqual([200, 409, 200]);
    expect(a.state.get(again.origin)?.size).toBe(17);
    expect(openCheckpoint(readFileSync(join(dir, 'checkpoint.cosigned'), 'utf8'), parseVerifierKey(again.key.vkey), again.origin).size).toBe(17);
    await again.close();
  });

  it('a witness that refuses (403) or hangs neither blocks the log nor counts: below the quorum nothing is served as cosigned', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-witness-push-'));
    const [good, stranger, hanging] = [
      await witness('witness.example/good'),
      await witness('witness.example/stranger'),
      await witness('witness.example/hang', { hang: true }),
    ];
    const log = await open(dir, [good, stranger, hanging], 2, 300);
    good.trust(log.key.vkey);
    // It follows this origin under another key (403), as a witness does after a log changed keys unannounced.
    stranger.trust(`${log.origin}+00000000+ASikMHkmzKtHhydguhp5EhzTKvrNForkNhsYP6fNTvT4`);
    log.append('r');
    await log.integrate();
    // Integrated and published while the hanging witness still holds the request.
    expect(log.checkpoint.size).toBe(1);
    await log.witnessed();
    expect({ good: good.statuses, stranger: stranger.statuses }).toEqual({ good: [200], stranger: [403] });
    expect(hanging.statuses).toEqual([]);
    expect(log.cosignedCheckpoint).toBe(undefined);
    await log.close();
  });

  it('does not count a cosignature that does not verify under the configured key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-witness-push-'));
    const [good, impostor] = [await witness('witness.example/good'), await witness('witness.example/impostor', { impostor: true })];
    const log = await open(dir, [good, impostor], 1);
    good.trust(log.key.vkey);
    impostor.trust(log.key.vkey);
    await grow(log, 2);
    expect(impostor.statuses).toEqual([200]);
    const cosigned = readFileSync(join(dir, 'checkpoint.cosigned'), 'utf8');
    expect(cosigned.slice(log.checkpoint.note.length).split(' ')[1]).toBe('witness.example/good');
    expect(cosigned.includes('witness.example/impostor')).toBe(false);
    await log.close();
  });

  it('refuses to start with a witness key that is not a cosignature/v1 key, and touches nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-witness-push-'));
    const log = await open(dir, [], 0);
    const untouched = mkdtempSync(join(tmpdir(), 'sigil-witness-push-'));
    await expect(
      TransparencyLog.open({
        dir: untouched,
        originPrefix: 'x',
        batchMs: 1000,
        idsKept: 1,
        logger,
        witnesses: { targets: [{ url: 'http://127.0.0.1:9', vkey: log.key.vkey }], quorum: 1, timeoutMs: 100 },
      }),
    ).rejects.toThrow(/the key of witness http:\/\/127\.0\.0\.1:9 is not a cosignature\/v1 key \(type 4\)/);
    expect(readdirSync(untouched)).toEqual([]);
    await log.close();
  });
});

describe('the log and `sigil witness serve` together', () => {
  it('a log pushes to a sigil witness: cosigned at each size, the witness state following the log', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-witness-push-'));
    const files = mkdtempSync(join(tmpdir(), 'sigil-witness-served-'));
    const keygen = await runSigilCli('witness', 'keygen', '--name', 'witness.example/served', '--key', join(files, 'w.json'));
    expect(keygen.code).toBe(0);
    const wvkey = keygen.stdout.trim();
    // The witness must trust the log's key and the log must know the witness's URL: the port is chosen first.
    const port = await freePort();
    const log = await TransparencyLog.open({
      dir,
      originPrefix: 'served.example',
      batchMs: 1000,
      idsKept: 10,
      logger,
      witnesses: { targets: [{ url: `http://127.0.0.1:${port}`, vkey: wvkey }], quorum: 1, timeoutMs: 10_000 },
    });
    const args = ['witness', 'serve', '--key', join(files, 'w.json'), '--state', join(files, 'state.json'), '--log', log.key.vkey];
    const child = spawn(process.execPath, [...SIGIL_FROM_SOURCES, ...args, '--listen', `127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      await waitFor('the witness to listen', () => out.includes('listening on'));
      log.start();
      await log.witnessed();
      await grow(log, 3);
      await grow(log, 260);
      const cosigned = readFileSync(join(dir, 'checkpoint.cosigned'), 'utf8');
      const opened = openCheckpoint(cosigned, parseVerifierKey(log.key.vkey), log.origin, { witnesses: [parseVerifierKey(wvkey)], required: 1 });
      expect(opened.size).toBe(263);
      expect(JSON.parse(readFileSync(join(files, 'state.json'), 'utf8'))).toEqual({ [log.origin]: { size: 263, root: opened.root.toString('base64') } });
    } finally {
      await killChild(child);
      await log.close();
    }
  });
});

describe('a Sigil configured with witnesses serves the cosigned checkpoint', () => {
  it('GET /v1/log/checkpoint.cosigned: 404 until the quorum cosigned, then the checkpoint with the witness line', async () => {
    const engine = await startTestEngine({ modelNames: ['m1'] });
    const dir = mkdtempSync(join(tmpdir(), 'sigil-witness-push-'));
    const a = await witness('witness.example/a');
    const sigil = await startTestSigil({
      upstreams: { main: { url: engine.baseUrl } },
      models: [{ id: 'm1' }],
      config: { brand: 'Acme', transparency_log: { dir, batch_ms: 50, witnesses: [{ url: a.url, vkey: a.vkey }], witness_timeout_ms: 2000 } },
    });
    try {
      const { log } = await attestedLog(sigil.url);
      const missing = await fetch(`${sigil.url}/v1/log/checkpoint.cosigned`);
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('not_found');
      a.trust(`${log.origin}+${log.key.keyId.toString(16).padStart(8, '0')}+${Buffer.concat([Buffer.from([1]), log.key.publicKey]).toString('base64')}`);
      const res = await fetch(`${sigil.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
        body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'witness me' }] }),
      });
      expect(res.status).toBe(200);
      const served = await waitFor('a cosigned checkpoint of one entry', async () => {
        const r = await fetch(`${sigil.url}/v1/log/checkpoint.cosigned`);
        const text = await r.text();
        return r.ok && text.split('\n')[1] === '1' ? text : undefined;
      });
      const opened = openCheckpoint(served, log.key, log.origin, { witnesses: [parseVerifierKey(a.vkey)], required: 1 });
      expect(opened.cosigners.map((c) => c.name)).toEqual(['witness.example/a']);
      expect(readFileSync(join(dir, 'checkpoint.cosigned'), 'utf8')).toBe(served);
    } finally {
      await sigil.close();
      await engine.close();
    }
  });
});
