#!/usr/bin/env node
// `npm start`'s prestart: runs `npm run build` only when a source is newer than the last build this
// script made (dist/.built), so a start with nothing changed goes straight to serving.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILD_INPUTS } from './build-inputs.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const stamp = join(root, 'dist/.built');

/** The newest modification time below a path, in ms. */
function newest(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return readdirSync(path).reduce((latest, entry) => Math.max(latest, newest(join(path, entry))), stat.mtimeMs);
}

const changed = BUILD_INPUTS.reduce((latest, input) => Math.max(latest, newest(join(root, input))), 0);
if (existsSync(stamp) && statSync(stamp).mtimeMs >= changed) {
  process.stderr.write('build: dist/ is up to date with the sources, not rebuilding\n');
} else {
  process.stderr.write('build: compiling the sources and the trust page into dist/ (about half a minute on 2 cores)...\n');
  const started = Date.now();
  const build = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
  process.stderr.write(`build: done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}
