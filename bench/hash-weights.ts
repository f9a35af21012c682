/**
 * Hashing speed of model weights: Sigil's start-up hash (the code `sigil serve` runs on a catalogue's `weights`)
 * against `sha256sum` on the same file, in the same run, so the two see the same disk and page cache.
 *
 *   tsx bench/hash-weights.ts FILE           # a multi-GB GGUF, for a real figure
 *   tsx bench/hash-weights.ts --make 4096 F  # first writes F with 4096 MB of random bytes
 *
 * Each tool runs twice in turn (sigil, sha256sum, sigil, sha256sum); the second pass shows the cached speed.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import { hashModel } from '@sigil/engine/hash';

async function time<T>(run: () => Promise<T> | T): Promise<{ value: T; seconds: number }> {
  const started = process.hrtime.bigint();
  const value = await run();
  return { value, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

const args = process.argv.slice(2);
if (args[0] === '--make') {
  const mb = Number(args[1]);
  // Written a fresh random megabyte at a time: a multi-GB file never sits in memory, and no block repeats.
  const fd = openSync(args[2]!, 'w');
  for (let i = 0; i < mb; i++) writeSync(fd, randomBytes(1 << 20));
  closeSync(fd);
  args.splice(0, 2);
}
const file = args[0];
if (file === undefined) {
  process.stderr.write('usage: tsx bench/hash-weights.ts [--make MB] FILE\n');
  process.exit(2);
}
const bytes = statSync(file).size;
const rate = (s: number) => `${(bytes / 1e6 / s).toFixed(0)} MB/s`;
for (const pass of [1, 2]) {
  const sigil = await time(() => hashModel(file));
  const coreutils = await time(() => 'sha256:' + execFileSync('sha256sum', [file], { encoding: 'utf8' }).split(' ')[0]);
  if (sigil.value !== coreutils.value) throw new Error(`the digests differ: ${sigil.value} and ${coreutils.value}`);
  process.stdout.write(
    `pass ${pass}: ${(bytes / 1e6).toFixed(0)} MB  sigil ${sigil.seconds.toFixed(2)} s (${rate(sigil.seconds)})  sha256sum ${coreutils.seconds.toFixed(2)} s (${rate(coreutils.seconds)})  ${sigil.value}\n`,
  );
}
