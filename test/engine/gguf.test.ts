import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel, type LlamaModel } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGgufHeader } from '../../packages/engine/src/gguf/read.ts';
import { toHalf } from '../../packages/engine/src/gguf/tensor-encoding.ts';
import { writeGguf } from '../../packages/engine/src/gguf/write.ts';
import type { GgufMetadata } from '../../packages/engine/src/gguf/types.ts';
import { GENERATED_CHAT_TEMPLATE } from '../../packages/engine/src/model/chat-template.ts';
import { makeModel } from '../../packages/engine/src/model/make-model.ts';
import { readVocab } from '../../packages/engine/src/vocab/read-vocab.ts';

const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url);

describe('GGUF writer and reader', () => {
  it('writes every metadata type and reads it back unchanged', () => {
    const metadata: GgufMetadata = new Map([
      ['a.u8', { type: 'u8', value: 255 }],
      ['a.i32', { type: 'i32', value: -7 }],
      ['a.f32', { type: 'f32', value: 0.5 }],
      ['a.u64', { type: 'u64', value: 2n ** 40n }],
      ['a.bool', { type: 'bool', value: true }],
      ['a.string', { type: 'string', value: 'héllo ▁' }],
      ['a.array', { type: 'array', itemType: 'string', values: ['x', '', 'zz'] }],
    ]);
    const file = writeGguf(metadata, [{ name: 't', dims: [32, 2], type: 'Q8_0', data: new Float32Array(64).fill(1) }]);
    const header = readGgufHeader(file);
    expect(header.version).toBe(3);
    expect(header.metadata).toEqual(metadata);
    expect(header.tensors).toEqual([{ name: 't', dims: [32, 2], type: 8, offset: 0n }]);
    expect(file.subarray(0, 4).toString('latin1')).toBe('GGUF');
    // Data starts 32-aligned: two Q8_0 blocks of 34 bytes, then padding to 32.
    expect(file.length % 32).toBe(0);
  });

  it('encodes IEEE half floats exactly', () => {
    expect([1, -2, 0.5, 65504, 0, 6.103515625e-5, 5.960464477539063e-8, 1e9].map(toHalf)).toEqual([0x3c00, 0xc000, 0x3800, 0x7bff, 0, 0x0400, 0x0001, 0x7c00]);
  });
});

describe('a generated model', () => {
  let dir: string;
  let model: LlamaModel;
  let path: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sigil-gguf-'));
    path = join(dir, 'random.gguf');
    await makeModel({ out: path, seed: 3 });
    const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
    model = await llama.loadModel({ modelPath: path });
  });

  afterAll(async () => {
    await model?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it('carries the llama hyperparameters, the chat template and every tensor in ggml order', async () => {
    const { metadata, tensors } = readGgufHeader(await readFile(path));
    expect(metadata.get('general.architecture')).toEqual({ type: 'string', value: 'llama' });
    expect(metadata.get('llama.embedding_length')).toEqual({ type: 'u32', value: 64 });
    expect(metadata.get('llama.block_count')).toEqual({ type: 'u32', value: 2 });
    expect(metadata.get('llama.vocab_size')).toEqual({ type: 'u32', value: 32064 });
    expect(metadata.get('tokenizer.ggml.eot_token_id')).toEqual({ type: 'u32', value: 32007 });
    expect(metadata.get('tokenizer.chat_template')).toEqual({ type: 'string', value: GENERATED_CHAT_TEMPLATE });
    expect(tensors.map((t) => `${t.name}[${t.dims.join(',')}]`)).toEqual([
      'token_embd.weight[64,32064]',
      ...[0, 1].flatMap((b) => [
        `blk.${b}.attn_norm.weight[64]`,
        `blk.${b}.attn_q.weight[64,64]`,
        `blk.${b}.attn_k.weight[64,64]`,
        `blk.${b}.attn_v.weight[64,64]`,
        `blk.${b}.attn_output.weight[64,64]`,
        `blk.${b}.ffn_norm.weight[64]`,
        `blk.${b}.ffn_gate.weight[64,256]`,
        `blk.${b}.ffn_up.weight[64,256]`,
        `blk.${b}.ffn_down.weight[256,64]`,
      ]),
      'output_norm.weight[64]',
      'output.weight[64,32064]',
    ]);
  });

  it('copies the vocabulary key for key from the vocab file', async () => {
    const vocab = await readVocab();
    const { metadata } = readGgufHeader(await readFile(path));
    for (const [key, value] of vocab.keys) expect(metadata.get(key), key).toEqual(value);
  });

  it("loads in llama.cpp and tokenizes llama.cpp's own Phi-3 test vectors to the expected ids", async () => {
    const texts = (await readFile(fixture('phi-3-vocab.inp'), 'utf8')).split('\n__ggml_vocab_test__\n').slice(0, -1);
    const expected = (await readFile(fixture('phi-3-vocab.out'), 'utf8'))
      .split('\n')
      .slice(0, -1)
      .map((line) => line.trim().split(' ').filter(Boolean).map(Number));
    expect(texts.length).toBe(46);
    expect(texts.map((text) => model.tokenize(text, false))).toEqual(expected);
  });

  it('renders chat through its template with the control tokens as single tokens', () => {
    expect(model.tokenize('<s><|user|>hi there<|end|><|assistant|>', true)).toEqual([1, 32010, 7251, 727, 32007, 32001]);
  });

  it('is the same bytes for the same seed', async () => {
    const again = join(dir, 'again.gguf');
    const made = await makeModel({ out: again, seed: 3 });
    expect(made.sha256).toBe(
      `sha256:${createHash('sha256')
        .update(await readFile(path))
        .digest('hex')}`,
    );
  });
});
