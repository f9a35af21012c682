import { measureCommand } from '../../src/cli/measure.ts';

/** Runs `sigil measure` in-process with its output captured. */
export async function runMeasure(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await measureCommand(argv, { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) } });
  return { code, stdout, stderr };
}
