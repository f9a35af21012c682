import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type { EvidenceExtension } from '../../src/cli/evidence-extension.ts';
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
