import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectCommand } from '../../src/cli/connect.ts';
import { verifyCommand } from '../../src/cli/verify.ts';
import { formatVerifierKey } from '../../src/protocol/tlog/note.ts';
import { runSigilCli } from '../support/cli.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { attestedLog, integrated } from '../support/transparency-log.ts';

let engine: TestEngine;
let noLog: TestSigil;
let logged: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  noLog = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
  logged = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { transparency_log: { dir: mkdtempSync(join(tmpdir(), 'sigil-tlog-told-')), batch_ms: 50 } },
  });
});
afterAll(async () => {
  await noLog.close(0);
  await logged.close(0);
  await engine.close();
});

const NOTE =
  'this service keeps no transparency log: each receipt still proves its own exchange to whoever holds it, but nothing ' +
  'publishes the receipts, so the operator could later deny one or show different clients different histories unseen (docs/log.md)';

describe('a verifier says what it knows of the log', () => {
  it('sigil verify --url says plainly that a service keeps no log, and the verdict is unchanged', async () => {
    let stdout = '';
    const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: () => true }, stdin: Readable.from([]), env: {} };
    const code = await verifyCommand(['-v', '--url', noLog.url, '--api-key', noLog.key, '--allow-no-tee', '--allow-unpinned-code'], io);
    expect(stdout).toMatch(new RegExp(`\nnote: ${NOTE.replace(/[().]/g, '\\$&')}\nverified with waivers: \\d+ checks passed; [^\n]+\n$`));
    expect(code).toBe(0);
    // Without -v, within the one verdict line.
    stdout = '';
    expect(await verifyCommand(['--url', noLog.url, '--api-key', noLog.key, '--allow-no-tee', '--allow-unpinned-code'], io)).toBe(0);
    expect(stdout).toMatch(/^verified with waivers: \d+ checks passed; [^\n]*; note: the service keeps no transparency log \(docs\/log\.md\)[^\n]*\n$/);
  });

  it('sigil connect says so when it starts', async () => {
    let stdout = '';
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    const code = await connectCommand([noLog.url, '--allow-insecure-http', '--allow-no-tee', '--listen', '127.0.0.1:0'], {
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: () => true },
      stopped,
      onListening: () => stop(),
    });
    expect(code).toBe(0);
    expect(stdout).toContain(`\nsigil connect: note: ${NOTE}\nsigil connect: ${noLog.url} verified;`);
  });

  it('sigil log verify on a healthy log with nothing pinned names the options that would pin it, with the key seen', async () => {
    const { log } = await attestedLog(logged.url);
    await integrated(log, 0);
    const run = await runSigilCli('log', 'verify', logged.url);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^PASS log\.tiles — /m);
    expect(run.stdout.slice(run.stdout.indexOf('\nThe log holds together'))).toBe(
      '\nThe log holds together, but nothing pins it yet. To hold it to what you trust, run again with:\n' +
        `  --log-key ${formatVerifierKey(log.key)}   the key seen now; check it against the service's attested binding (sigil verify) once, then pin it\n` +
        '  --witness VKEY [--witnesses N]   the cosignature keys of witnesses you trust (the operator publishes which witness the log)\n' +
        `  --state sigil-log-${log.origin.replace(/\//g, '_')}.json   a file of your own: each later run checks the log only grew from what this one saw\n`,
    );
  });
});
