#!/usr/bin/env node
// Copies the files the compiled code reads beside itself (tsc emits only JavaScript): the built-in engine's vocabulary.
import { copyFile, mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(root, process.argv[2] ?? 'dist');
// Each from the built-in engine's package (packages/engine/src/, where node_modules links it) to dist/engine/, where
// its bundled code looks for it.
const engineSrc = join(dirname(createRequire(import.meta.url).resolve('@sigil/engine/package.json')), 'src');
const ASSETS = ['vocab/phi-3.gguf', 'vocab/LICENSE-llama.cpp', 'vocab/README.md'];

for (const asset of ASSETS) {
  await mkdir(dirname(join(out, 'engine', asset)), { recursive: true });
  await copyFile(join(engineSrc, asset), join(out, 'engine', asset));
}
