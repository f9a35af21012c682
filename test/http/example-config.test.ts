import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { parseConfig } from '../../src/config/load.ts';
import { startSigil, type RunningSigil } from '../../src/http/start.ts';
import { createLogger } from '../../src/logger/logger.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';

const CONFIG_DIR = join(import.meta.dirname, '../../config');

describe('config/sigil.example.yaml in front of an engine serving the README recipe model', () => {
  let engine: TestEngine;
  let sigil: RunningSigil;
  let key: string;

  beforeAll(async () => {
    engine = await startTestEngine({ modelNames: ['qwen3-32b'] });
    const example = parse(readFileSync(join(CONFIG_DIR, 'sigil.example.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
    const dir = mkdtempSync(join(tmpdir(), 'sigil-example-'));
    // Only what a laptop without a TEE must change: loopback, no TEE, no TLS, the test engine's address.
    const config = {
      ...example,
      listen: { host: '127.0.0.1', port: 0 },
      upstreams: { vllm: { ...(example.upstreams!.vllm as object), url: engine.baseUrl } },
      catalogue: join(CONFIG_DIR, 'models.yaml'),
      auth: { keys_file: join(dir, 'api-keys') },
      attestation: { provider: 'none' },
      tls: { mode: 'off' },
      log: { level: 'silent' },
    };
    key = addKey(join(dir, 'api-keys')).key;
    sigil = await startSigil(parseConfig(stringify(config), join(dir, 'sigil.yaml')), { logger: createLogger('silent') });
  });
  afterAll(async () => {
    await sigil?.close();
    await engine?.close();
  });

  it('lists only the model the engine serves', async () => {
    const listed = (await (await fetch(`${sigil.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(listed.data.map((m) => m.id)).toEqual(['qwen3-32b']);
  });

  it('answers a chat on the first model it lists', async () => {
    const response = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'qwen3-32b', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 }),
    });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { model: string }).model).toBe('qwen3-32b');
  });
});
