import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { runSigilCli } from '../support/cli.ts';
import { attestedLog, integrated } from '../support/transparency-log.ts';
import { formatVerifierKey, parseVerifierKey } from '../../src/protocol/tlog/note.ts';
import { checkpointText } from '../../src/protocol/tlog/checkpoint.ts';
import { verifyWholeLog, type TrustedLog } from '../../src/verify/tlog/log-client.ts';
import { rootHash } from '../../src/protocol/tlog/tree-hashes.ts';
import { TiledTree } from '../../src/tlog/tiled-tree.ts';
import { persistTiles, writeDurably } from '../../src/tlog/tile-files.ts';
import { generateLogKey, signNote } from '../../src/tlog/log-key.ts';

let engine: TestEngine;
let sigil: TestSigil | undefined;
const work = mkdtempSync(join(tmpdir(), 'sigil-tlog-refusals-'));

async function start(dir: string): Promise<TestSigil> {
  return startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1' }],
    config: { brand: 'Acme', transparency_log: { dir, batch_ms: 50 } },
  });
}

async function chats(s: TestSigil, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${s.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
      body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: `entry ${i}` }] }),
    });
    expect(res.status).toBe(200);
  }
}

const trusted = async (s: TestSigil): Promise<TrustedLog> => (await attestedLog(s.url)).log;
const cli = runSigilCli;

/** A log of `entries` with some history, written by Sigil, then stopped: what each refusal starts from. */
async function storedLog(entries: number): Promise<string> {
  const dir = mkdtempSync(join(work, 'log-'));
  const s = await start(dir);
  await chats(s, entries);
  await integrated(await trusted(s), entries);
  await s.close();
  return dir;
}

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
});

afterAll(async () => {
  await sigil?.close();
  await engine.close();
});

describe('a stored log that does not hold together is refused at start', () => {
  it('refuses a tampered entry', async () => {
    const dir = await storedLog(3);
    const bundle = join(dir, 'tile/entries/000.p/3');
    const bytes = readFileSync(bundle);
    bytes[5]! ^= 1;
    writeFileSync(bundle, bytes);
    // The partial level-0 tile on disk no longer matches the entries: that is seen first.
    await expect(start(dir)).rejects.toThrow(/tile\/0\/000\.p\/3 does not match the hashes of the stored entries: the log was altered/);
  });

  it('refuses a truncated log: fewer entries stored than the last checkpoint covers', async () => {
    const dir = await storedLog(2);
    rmSync(join(dir, 'tile/entries/000.p'), { recursive: true });
    await expect(start(dir)).rejects.toThrow(
      /covers 2 entries and only 0 are stored: the log was truncated|covers entries the stored entry bundles do not hold/,
    );
  });

  it('refuses entries that were swapped for others, though every tile was recomputed to match', async () => {
    const dir = await storedLog(2);
    const tree = new TiledTree();
    tree.append(randomBytes(32));
    tree.append(randomBytes(32));
    rmSync(join(dir, 'tile'), { recursive: true });
    await persistTiles(dir, tree, 0);
    await expect(start(dir)).rejects.toThrow(/do not hash to the root of .*checkpoint: the log was altered/);
  });
});

describe('verifiers refuse what does not add up', () => {
  it('refuses a tile a mirror altered', async () => {
    sigil = await start(mkdtempSync(join(work, 'live-')));
    await chats(sigil, 2);
    const log = await trusted(sigil);
    await integrated(log, 2);
    const tampering: typeof fetch = async (input) => {
      const res = await fetch(input);
      if (!String(input).includes('/tile/0/')) return res;
      const bytes = Buffer.from(await res.arrayBuffer());
      bytes[0]! ^= 1;
      return new Response(bytes, { status: 200 });
    };
    await expect(verifyWholeLog({ ...log, fetch: tampering })).rejects.toThrow(
      /tile\/0\/000\.p\/2 does not hold the hashes of the entries below it: the tile was tampered with/,
    );
  });

  it('refuses a checkpoint without the required witness, and accepts it once that witness cosigned', async () => {
    const log = await trusted(sigil!);
    const witnessKey = join(work, 'witness.json');
    const keygen = await cli('witness', 'keygen', '--name', 'witness.example/w1', '--key', witnessKey);
    expect(keygen.code).toBe(0);
    const witness = keygen.stdout.trim();
    expect(parseVerifierKey(witness).type).toBe(4);
    const vkey = formatVerifierKey(log.key);
    const missing = await cli('log', 'verify', sigil!.url, '--log-key', vkey, '--witness', witness, '--state', join(work, 'seen-a.json'));
    expect(missing.stdout).toMatch(/^FAIL log.witnesses — ERR_TLOG_WITNESS: 0 of the required 1 witnesses cosigned the checkpoint$/m);
    expect(missing.code).toBe(1);

    const cosigned = join(work, 'cosigned');
    const first = await cli('witness', sigil!.url, '--log-key', vkey, '--key', witnessKey, '--state', join(work, 'witness-state.json'), '--out', cosigned);
    expect(first.stderr).toMatch(/cosigned .* at 2 entries \(first checkpoint of this origin for this witness\)/);
    const ok = await cli('log', 'verify', sigil!.url, '--log-key', vkey, '--witness', witness, '--checkpoint', cosigned, '--state', join(work, 'seen-a.json'));
    expect(ok.stdout).toMatch(/^PASS log.witnesses — 1 of the required 1 witnesses cosigned it: witness.example\/w1 at /m);
    expect(ok.stdout.trim().split('\n').at(-1)).toBe('verified: all 5 checks passed');
    expect(ok.code).toBe(0);

    await chats(sigil!, 1);
    await integrated(log, 3);
    const second = await cli('witness', sigil!.url, '--log-key', vkey, '--key', witnessKey, '--state', join(work, 'witness-state.json'), '--out', cosigned);
    expect(second.stderr).toMatch(/at 3 entries: consistent with the 2 cosigned before/);
  });

  it('refuses a forked log: same origin, another history; the witness will not cosign it and the verifier with state catches it', async () => {
    const honest = await trusted(sigil!);
    const state = join(work, 'seen-fork.json');
    const seen = await cli('log', 'verify', sigil!.url, '--log-key', formatVerifierKey(honest.key), '--witnesses', '0', '--state', state);
    expect(seen.code).toBe(0);
    await sigil!.close();
    sigil = undefined;

    // The operator, who holds the folder outside the enclave, writes another history under the same origin and signs it with a key of its own.
    const forged = mkdtempSync(join(work, 'forged-'));
    const tree = new TiledTree();
    for (let i = 0; i < 4; i++) tree.append(randomBytes(32));
    await persistTiles(forged, tree, 0);
    const key = generateLogKey(honest.origin);
    await writeDurably(join(forged, 'log.json'), JSON.stringify({ origin: honest.origin, created: new Date().toISOString(), keys: [key.vkey] }));
    await writeDurably(join(forged, 'checkpoint'), signNote(checkpointText(honest.origin, tree.size, rootHash(tree.reader, tree.size)), key));
    sigil = await start(forged);
    const fork = await trusted(sigil);
    expect(fork.origin).toBe(honest.origin);

    const verdict = await cli('log', 'verify', sigil.url, '--log-key', formatVerifierKey(fork.key), '--witnesses', '0', '--state', state);
    expect(verdict.stdout).toMatch(
      /^FAIL log.consistency — ERR_TLOG_PROOF: the consistency proof does not lead to the root of the (first|second) tree \([34]\): the log forked/m,
    );
    expect(verdict.code).toBe(1);
    const witnessed = await cli(
      'witness',
      sigil.url,
      '--log-key',
      formatVerifierKey(fork.key),
      '--key',
      join(work, 'witness.json'),
      '--state',
      join(work, 'witness-state.json'),
    );
    expect(witnessed.stderr).toMatch(/^sigil witness: refused: ERR_TLOG_PROOF/m);
    expect(witnessed.code).toBe(1);
  });
});
