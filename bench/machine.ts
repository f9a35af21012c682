/** What a benchmark report says of where and on what it ran: the machine, and the Sigil commit. */
import { spawnSync } from 'node:child_process';
import { cpus, release, totalmem } from 'node:os';
import { ROOT } from './peers.ts';

export function describeMachine(): string {
  const cpu = cpus();
  return `${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${cpu.length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB, Linux ${release()}`;
}

export function sigilCommit(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim() || 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim() !== '';
  return dirty ? `${head} (+ uncommitted changes in src/)` : head;
}
