import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import type { EvidenceExtension } from '../../src/cli/evidence-extension.ts';
import { verifyCommand, type VerifyIo } from '../../src/cli/verify.ts';
import { verifyEvidenceCommand } from '../../src/cli/verify-evidence.ts';

/**
 * `node` arguments that run the `sigil` command from the TypeScript sources (through tsx's loader), so a
 * test of the CLI tests the code beside it, not whatever `npm run build` last left in dist/.
 * test/build/dist.test.ts runs the compiled bin/sigil.js.
 */
export const SIGIL_FROM_SOURCES = [
  '--import',
  pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href,
  fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url)),
];

/** Runs `sigil ARGS` from the sources in a child process; a non-zero exit is returned, not thrown. */
export async function runSigilCli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [...SIGIL_FROM_SOURCES, ...args]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `sigil verify -v` in-process, its output captured: an empty stdin and environment unless given, and any
 * other `VerifyIo` field (a test's AMD/Intel roots, GPU roots, a clock) as it is.
 */
export async function runSigilVerify(
  argv: string[],
  opts: { stdin?: string; env?: Record<string, string> } & Partial<Omit<VerifyIo, 'stdout' | 'stderr' | 'stdin' | 'env'>> = {},
): Promise<CliRun> {
  const { stdin, env, ...rest } = opts;
  let stdout = '';
  let stderr = '';
  // -v: the tests read every check (the default prints the verdict line only).
  const code = await verifyCommand(['-v', ...argv], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    stdin: Readable.from(stdin === undefined ? [] : [Buffer.from(stdin)]),
    env: env ?? {},
    ...rest,
  });
  return { code, stdout, stderr };
}

export interface VerifyEvidenceRun {
  code: number;
  stdout: string;
  stderr: string;
  /** Each printed check's mark (PASS, FAIL or ---- for not pinned / not checked), by check name. */
  marks: Record<string, string>;
}

/** Runs `sigil verify-evidence` in-process with its clock at `now`, its output captured and each check's mark read back. */
export async function runVerifyEvidence(argv: string[], now: Date, extensions?: EvidenceExtension[]): Promise<VerifyEvidenceRun> {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    now,
    ...(extensions === undefined ? {} : { extensions }),
  };
  const code = await verifyEvidenceCommand(argv, io);
  const marks = Object.fromEntries([...stdout.matchAll(/^(PASS|FAIL|WAIVED|----) (\S+) — /gm)].map((m) => [m[2]!, m[1]!]));
  return { code, stdout, stderr, marks };
}
