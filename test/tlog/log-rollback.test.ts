import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hash, randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger/logger.ts';
import { LogRolledBack, TransparencyLog } from '../../src/tlog/transparency-log.ts';
import { LogStateError } from '../../src/tlog/signed-state.ts';
import { startTestEngine } from '../support/test-engine.ts';
import { startTestSigil } from '../support/sigil.ts';

const logger = createLogger('silent');
const work = mkdtempSync(join(tmpdir(), 'sigil-tlog-rollback-'));

function open(dir: string, extra: { statePath?: string; stateKey?: Buffer } = {}): Promise<TransparencyLog> {
  return TransparencyLog.open({ dir, originPrefix: 'test.example', batchMs: 1000, idsKept: 10, logger, ...extra });
}

async function grow(log: TransparencyLog, entries: number): Promise<void> {
  for (let i = 0; i < entries; i++) log.append(`receipt ${log.checkpoint.size + i} ${randomBytes(4).toString('hex')}`);
  await log.integrate();
}

/** Every file of a folder and a hash of its bytes: what "changed nothing" compares. */
function contents(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) files[join(e.parentPath, e.name).slice(dir.length)] = hash('sha256', readFileSync(join(e.parentPath, e.name)));
  }
  return files;
}

/** A log of 300 entries, and a copy of its folder taken at 100 (consistent, older): what a rollback restores. */
async function logWithOlderCopy(extra: { statePath?: string; stateKey?: Buffer } = {}) {
  const dir = mkdtempSync(join(work, 'log-'));
  const older = mkdtempSync(join(work, 'older-'));
  const newer = mkdtempSync(join(work, 'newer-'));
  const log = await open(dir, extra);
  await grow(log, 100);
  // A copy of a running log's folder: its lock names this live process, which a restore after a stop would not.
  cpSync(dir, older, { recursive: true, filter: (path) => !path.endsWith('/lock') });
  await grow(log, 200);
  await log.close();
  cpSync(dir, newer, { recursive: true });
  const rollBack = () => {
    rmSync(dir, { recursive: true });
    cpSync(older, dir, { recursive: true });
  };
  const restore = () => {
    rmSync(dir, { recursive: true });
    cpSync(newer, dir, { recursive: true });
  };
  return { dir, log, rollBack, restore };
}

describe('a log never signs a checkpoint inconsistent with one it signed before', () => {
  it('refuses a folder rolled back to an older consistent copy, changing nothing; with the newest copy restored it starts and extends the log', async () => {
    const statePath = join(work, `state-${randomBytes(4).toString('hex')}`);
    const { dir, log, rollBack, restore } = await logWithOlderCopy({ statePath });
    rollBack();
    const before = contents(dir);
    const state = readFileSync(statePath, 'utf8');
    const refusal = await open(dir, { statePath }).catch((err: Error) => err);
    expect(refusal).toBeInstanceOf(LogRolledBack);
    expect((refusal as Error).message).toBe(
      `the state file ${statePath} shows this log signed a checkpoint of 300 entries, and ${dir} holds 100: the folder was rolled back, and extending it would sign a second history under ${log.origin}. ` +
        'Restore the folder from a copy holding at least 300 entries, or start a new log (a new origin) in an empty folder; the refused start changed nothing',
    );
    expect(contents(dir)).toEqual(before);
    expect(readFileSync(statePath, 'utf8')).toBe(state);

    restore();
    const again = await open(dir, { statePath });
    expect({ origin: again.origin, size: again.checkpoint.size }).toEqual({ origin: log.origin, size: 300 });
    await grow(again, 5);
    await again.close();
    expect(JSON.parse(readFileSync(statePath, 'utf8'))).toEqual({ checkpoint: again.checkpoint.note });
  });

  it('refuses an emptied folder under a configured origin the state file says signed (a rollback to nothing)', async () => {
    const statePath = join(work, `state-${randomBytes(4).toString('hex')}`);
    const dir = mkdtempSync(join(work, 'emptied-'));
    const log = await TransparencyLog.open({ dir, origin: 'log.example.com/v1/log', originPrefix: 'x', batchMs: 1000, idsKept: 1, logger, statePath });
    await grow(log, 3);
    await log.close();
    rmSync(dir, { recursive: true });
    await expect(
      TransparencyLog.open({ dir, origin: 'log.example.com/v1/log', originPrefix: 'x', batchMs: 1000, idsKept: 1, logger, statePath }),
    ).rejects.toThrow(`the state file ${statePath} shows this log signed a checkpoint of 3 entries, and ${dir} holds 0: the folder was rolled back`);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses a folder whose entries differ from the signed ones at the same size (another history), naming the state file', async () => {
    const statePath = join(work, `state-${randomBytes(4).toString('hex')}`);
    const { dir, rollBack } = await logWithOlderCopy({ statePath });
    rollBack();
    // The older copy grown to 300 again, by a start that had no state file: a second history of the same size.
    const forked = await open(dir);
    await grow(forked, 200);
    await forked.close();
    await expect(open(dir, { statePath })).rejects.toThrow(
      `the first 300 entries of ${dir} do not hash to the root of the checkpoint in the state file ${statePath}: the folder holds another history`,
    );
  });

  it('refuses a folder that does not extend its own checkpoint.cosigned (the latest checkpoint its witnesses cosigned)', async () => {
    const { dir, rollBack } = await logWithOlderCopy();
    const cosigned = readFileSync(join(dir, 'checkpoint'), 'utf8');
    rollBack();
    // What a witness push keeps: the checkpoint and the log's signature, then the witnesses' lines (not checked here).
    writeFileSync(join(dir, 'checkpoint.cosigned'), cosigned);
    await expect(open(dir)).rejects.toThrow(
      new RegExp(`^${dir}/checkpoint.cosigned shows this log signed a checkpoint of 300 entries, and ${dir} holds 100: the folder was rolled back`),
    );
  });

  it('with a sealed seed, refuses a state file the operator edited (its seal does not verify)', async () => {
    const statePath = join(work, `state-${randomBytes(4).toString('hex')}`);
    const stateKey = randomBytes(32);
    const { dir, rollBack } = await logWithOlderCopy({ statePath, stateKey });
    const sealed = JSON.parse(readFileSync(statePath, 'utf8')) as { checkpoint: string; hmac: string };
    expect(sealed.hmac).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    rollBack();
    // The rolled-back folder's own checkpoint, put in the state file to make the rollback pass: the seal refuses it.
    writeFileSync(statePath, JSON.stringify({ checkpoint: readFileSync(join(dir, 'checkpoint'), 'utf8'), hmac: sealed.hmac }));
    const refusal = await open(dir, { statePath, stateKey }).catch((err: Error) => err);
    expect(refusal).toBeInstanceOf(LogStateError);
    expect((refusal as Error).message).toBe(
      `the log's state file ${statePath} was not written by this enclave (its seal does not verify): it was edited, or made by other code. ` +
        'A code upgrade is a new log identity (docs/log.md#identity): give transparency_log.dir and transparency_log.state new places (and transparency_log.origin a new name), and keep this folder for auditors',
    );
  });

  it('a Sigil on a rolled-back folder does not start, and says what to do; the state file sits beside the folder by default', async () => {
    const engine = await startTestEngine({ modelNames: ['m1'] });
    try {
      const dir = join(mkdtempSync(join(work, 'sigil-')), 'log');
      const { log, rollBack } = await (async () => {
        const s = await startTestSigil({
          upstreams: { main: { url: engine.baseUrl } },
          models: [{ id: 'm1' }],
          config: { brand: 'Acme', transparency_log: { dir, batch_ms: 50 }, log: { level: 'silent' } },
        });
        const older = mkdtempSync(join(work, 'sigil-older-'));
        cpSync(dir, older, { recursive: true, filter: (path) => !path.endsWith('/lock') });
        for (let i = 0; i < 3; i++) {
          const res = await fetch(`${s.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
            body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: `entry ${i}` }] }),
          });
          expect(res.status).toBe(200);
        }
        await s.close();
        const state = JSON.parse(readFileSync(`${dir}.state`, 'utf8')) as { checkpoint: string };
        return {
          log: state.checkpoint,
          rollBack: () => {
            rmSync(dir, { recursive: true });
            cpSync(older, dir, { recursive: true });
          },
        };
      })();
      expect(log.split('\n')[1]).toBe('3');
      rollBack();
      await expect(
        startTestSigil({
          upstreams: { main: { url: engine.baseUrl } },
          models: [{ id: 'm1' }],
          config: { brand: 'Acme', transparency_log: { dir, batch_ms: 50 }, log: { level: 'silent' } },
        }),
      ).rejects.toThrow(
        new RegExp(
          `^transparency_log: the state file ${dir}.state shows this log signed a checkpoint of 3 entries, and ${dir} holds 0: the folder was rolled back.*\\(docs/log.md#rollback\\)$`,
        ),
      );
    } finally {
      await engine.close();
    }
  });
});
