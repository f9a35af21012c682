import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { attestedLog } from '../support/transparency-log.ts';
import { fetchCheckpoint } from '../../src/verify/tlog/log-client.ts';
import { parseConfig } from '../../src/config/load.ts';
import { configuredLogOrigin } from '../../src/http/start.ts';

let engine: TestEngine;
const work = mkdtempSync(join(tmpdir(), 'sigil-tlog-identity-'));

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
});
afterAll(async () => {
  await engine.close();
});

function start(transparencyLog: Record<string, unknown>): Promise<TestSigil> {
  return startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1' }],
    config: { transparency_log: { batch_ms: 50, ...transparencyLog }, log: { level: 'silent' } },
  });
}

describe('one log identity across restarts', () => {
  it('a key file: the same verifier key on every start, declared loaded in the binding, one key in log.json', async () => {
    const dir = join(mkdtempSync(join(work, 'file-')), 'log');
    const keyFile = join(work, 'log-key.pem');
    execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', keyFile]);
    const first = await start({ dir, key_source: 'file', key_file: keyFile });
    const { log, keyOrigin } = await attestedLog(first.url);
    expect(keyOrigin).toEqual({ origin: 'loaded', file: keyFile });
    await first.close();
    const second = await start({ dir, key_source: 'file', key_file: keyFile });
    const again = await attestedLog(second.url);
    expect(again.log.key.publicKey.equals(log.key.publicKey)).toBe(true);
    expect(again.log.origin).toBe(log.origin);
    await fetchCheckpoint(again.log);
    await second.close();
    expect((JSON.parse(readFileSync(join(dir, 'log.json'), 'utf8')) as { keys: string[] }).keys).toHaveLength(1);
  });

  it('without a key source a new key at each start, and the binding says generated', async () => {
    const dir = join(mkdtempSync(join(work, 'generated-')), 'log');
    const first = await start({ dir });
    const { log, keyOrigin } = await attestedLog(first.url);
    expect(keyOrigin).toEqual({ origin: 'generated' });
    await first.close();
    const second = await start({ dir });
    expect((await attestedLog(second.url)).log.key.publicKey.equals(log.key.publicKey)).toBe(false);
    await second.close();
  });

  it('a configured origin names the log; a folder of another origin is refused, saying the origin is the log’s name', async () => {
    const dir = join(mkdtempSync(join(work, 'origin-')), 'log');
    const first = await start({ dir, origin: 'log.example.com/v1/log' });
    expect((await fetchCheckpoint((await attestedLog(first.url)).log)).origin).toBe('log.example.com/v1/log');
    await first.close();
    await expect(start({ dir, origin: 'other.example.com/v1/log' })).rejects.toThrow(
      `transparency_log: ${dir} keeps the log log.example.com/v1/log, and transparency_log.origin is other.example.com/v1/log: the origin is the log's name. ` +
        'Set it back to log.example.com/v1/log, or start the new log in an empty folder with a state file of its own (docs/log.md#identity)',
    );
    // The stable code says which refusal it is (docs/errors.md), whatever the message's wording.
    await expect(start({ dir, origin: 'other.example.com/v1/log' })).rejects.toMatchObject({ code: 'ERR_LOG_ORIGIN_MISMATCH', name: 'LogOriginMismatch' });
  });

  it('a key file that is not Ed25519 stops the start, saying how to make one', async () => {
    const keyFile = join(work, 'p256.pem');
    execFileSync('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', keyFile]);
    await expect(start({ dir: join(work, 'p256-log'), key_source: 'file', key_file: keyFile })).rejects.toThrow(
      `transparency_log.key_file ${keyFile}: a log key is Ed25519 (C2SP signed-note), not ec`,
    );
  });

  it('the origin defaults to the log’s URL prefix without its scheme where Sigil knows its public name (ACME), else to none (a random one)', () => {
    const base = 'listen: {port: 0}\nauth: {keys_file: k}\n';
    const acme = 'tls: {mode: acme, hostnames: [ai.example.com, other.example.com], acme: {directory_url: "https://acme.example/dir"}}\n';
    expect(configuredLogOrigin(parseConfig(`${base}${acme}transparency_log: {dir: log}\n`, 'sigil.yaml'))).toBe('ai.example.com/v1/log');
    expect(configuredLogOrigin(parseConfig(`${base}${acme}transparency_log: {dir: log, origin: log.example.net}\n`, 'sigil.yaml'))).toBe('log.example.net');
    expect(configuredLogOrigin(parseConfig(`${base}transparency_log: {dir: log}\n`, 'sigil.yaml'))).toBeUndefined();
  });
});
