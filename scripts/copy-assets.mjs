#!/usr/bin/env node
// Copies the files the compiled code reads beside itself (tsc emits only JavaScript): the built-in engine's vocabulary.
import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(root, process.argv[2] ?? 'dist');
const ASSETS = ['engine/vocab/phi-3.gguf', 'engine/vocab/LICENSE-llama.cpp', 'engine/vocab/README.md'];

for (const asset of ASSETS) {
  await mkdir(dirname(join(out, asset)), { recursive: true });
  await copyFile(join(root, 'src', asset), join(out, asset));
}
