import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { run } from '../../src/cli/hash-model.ts';
import { hashModel, modelManifest } from '../../packages/engine/src/hash/model-hash.ts';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('sigil hash-model', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sigil-hash-'));
    const model = join(dir, 'model');
    await mkdir(join(model, 'shards'), { recursive: true });
    await mkdir(join(model, '.cache'));
    await writeFile(join(model, 'shards', 'model-00002.safetensors'), 'two');
    await writeFile(join(model, 'model-00001.safetensors'), 'one');
    await writeFile(join(model, 'model.safetensors.index.json'), '{"weight_map":{}}');
    await writeFile(join(model, 'config.json'), '{"architectures":["LlamaForCausalLM"]}');
    await writeFile(join(model, 'tokenizer.json'), '{}');
    await writeFile(join(model, 'README.md'), 'not part of the model');
    await writeFile(join(model, '.cache', 'config.json'), 'hidden');
    await writeFile(join(dir, 'weights.gguf'), 'GGUF bytes');
  });

  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("hashes a file's bytes", async () => {
    expect(await hashModel(join(dir, 'weights.gguf'))).toBe(`sha256:${sha256('GGUF bytes')}`);
  });

  it('hashes a directory through a sorted sha256sum-style manifest of its weight, config and tokenizer files', async () => {
    const manifest = [
      `${sha256('{"architectures":["LlamaForCausalLM"]}')}  config.json\n`,
      `${sha256('one')}  model-00001.safetensors\n`,
      `${sha256('{"weight_map":{}}')}  model.safetensors.index.json\n`,
      `${sha256('two')}  shards/model-00002.safetensors\n`,
      `${sha256('{}')}  tokenizer.json\n`,
    ].join('');
    expect(await modelManifest(join(dir, 'model'))).toBe(manifest);
    expect(await hashModel(join(dir, 'model'))).toBe(`sha256:${sha256(manifest)}`);
  });

  it('prints the hash on stdout and exits 0; a missing path exits 1', async () => {
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(await run([join(dir, 'weights.gguf')])).toBe(0);
      expect(out.mock.calls.map((c) => String(c[0])).join('')).toBe(`sha256:${sha256('GGUF bytes')}\n`);
      expect(await run([join(dir, 'absent')])).toBe(1);
      expect(await run([])).toBe(2);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  });
});
