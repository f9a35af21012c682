import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { stringify } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';
import { killChild } from '../support/kill-child.ts';
import { catalogueEntry } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';

let engine: TestEngine;
let config: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  const dir = mkdtempSync(join(tmpdir(), 'sigil-foreign-parent-'));
  writeFileSync(join(dir, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0)] }));
  config = join(dir, 'sigil.yaml');
  writeFileSync(
    config,
    stringify({ listen: { host: '127.0.0.1', port: 0 }, upstreams: { e: { url: engine.baseUrl } }, catalogue: 'models.yaml', auth: { keys_file: 'keys' } }),
  );
  addKey(join(dir, 'keys'));
});

afterEach(async () => {
  for (const child of children.splice(0)) await killChild(child);
});

afterAll(async () => {
  await engine.close();
});

/** What `sigil serve` did first when this process started it with an IPC channel: asked for keys, listened, or exited (with its stderr). */
function firstMove(env: Record<string, string>): Promise<{ move: string; stderr: string }> {
  const child = spawn(process.execPath, [...SIGIL_FROM_SOURCES, 'serve', '--config', config], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: { ...process.env, ...env },
  });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return new Promise((resolve) => {
    child.on('message', (m: { type?: string }) => resolve({ move: `asked ${m.type}`, stderr }));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if ((JSON.parse(line) as { msg?: string }).msg === 'sigil listening') resolve({ move: 'listened', stderr });
    });
    child.once('exit', (code) => resolve({ move: `exited ${code}`, stderr }));
  });
}

describe('a process that is not a Sigil primary cannot drive sigil serve over IPC', () => {
  it('started as a cluster worker (NODE_UNIQUE_ID) by another program, it refuses and never asks that parent for keys', async () => {
    const { move, stderr } = await firstMove({ NODE_UNIQUE_ID: '1' });
    expect(move).toBe('exited 1');
    expect(stderr).toContain(
      `sigil: refusing to serve as a cluster worker (NODE_UNIQUE_ID is set): the parent process ${process.pid} is not a Sigil primary running this same program (its command line (`,
    );
    expect(stderr).toContain('a worker takes its keys, configuration and evidence from its parent.');
  });

  it('started with an IPC channel (NODE_CHANNEL_FD) but no worker id, it refuses to start', async () => {
    const { move, stderr } = await firstMove({});
    expect(move).toBe('exited 1');
    expect(stderr).toContain('sigil: refusing to start: sigil serve was given an IPC channel to its parent (NODE_CHANNEL_FD');
  });
});
