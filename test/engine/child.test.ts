import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEngineProcess, type EngineProcess } from '../../packages/engine/src/child.ts';
import { SIGIL_PROGRAM } from '../../src/http/sigil-program.ts';
import { ensureDemoModel } from '../../packages/engine/src/demo-model.ts';

let dir: string;
let demoPath: string;
let engine: EngineProcess | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sigil-child-'));
  demoPath = join(dir, 'models', 'demo.gguf');
});

afterAll(async () => {
  await engine?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('the zero-config demo model', () => {
  it('is made once, then reused, and its hash is the SHA-256 of its bytes', async () => {
    const made = await ensureDemoModel(demoPath);
    const written = await stat(demoPath);
    const again = await ensureDemoModel(demoPath);
    expect(made).toEqual({
      path: demoPath,
      sha256: `sha256:${createHash('sha256')
        .update(await readFile(demoPath))
        .digest('hex')}`,
    });
    expect(again).toEqual(made);
    expect((await stat(demoPath)).mtimeMs).toBe(written.mtimeMs);
  });
});

describe('the engine as a child process', () => {
  it('starts on a free loopback port, serves chat completions, and is gone after stop()', async () => {
    engine = await startEngineProcess({ program: SIGIL_PROGRAM, modelPath: demoPath, threads: 1, parallel: 1, contextSize: 512 });
    expect(engine.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(engine.modelName).toBe('demo');
    const res = await fetch(`${engine.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
    });
    const body = (await res.json()) as { model: string; usage: { completion_tokens: number } };
    expect(res.status).toBe(200);
    expect(body.model).toBe('demo');
    expect(body.usage.completion_tokens).toBe(4);
    const { url } = engine;
    await engine.stop();
    engine = undefined;
    await expect(fetch(`${url}/health`)).rejects.toMatchObject({ message: 'fetch failed', cause: { code: 'ECONNREFUSED' } });
  });

  it('fails with the reason when the model file does not exist', async () => {
    await expect(startEngineProcess({ program: SIGIL_PROGRAM, modelPath: join(dir, 'absent.gguf') })).rejects.toThrow(/exited .* before listening/);
  });

  it('gives up after engine.start_timeout_ms when the engine is not listening by then', async () => {
    // 20 ms: less than any Node process takes to start, so the child cannot have listened (or exited) yet.
    await expect(startEngineProcess({ program: SIGIL_PROGRAM, modelPath: join(dir, 'absent.gguf'), startTimeoutMs: 20 })).rejects.toThrow(
      'the engine did not start within 0.02 s',
    );
  });
});
