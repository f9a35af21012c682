import { connectCommand } from '../../src/cli/connect.ts';
import type { RunningConnect } from '../../src/connect/start.ts';

/** What `sigil connect` printed and its exit status. */
export interface ConnectRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `sigil connect` in-process; `during` gets the running endpoint, and the command stops when it returns. */
export async function sigilConnect(argv: string[], during?: (running: RunningConnect) => Promise<void>): Promise<ConnectRun> {
  let stdout = '';
  let stderr = '';
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  let work: Promise<void> = Promise.resolve();
  const code = await connectCommand(argv, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    stopped,
    onListening: (running) => {
      work = (during?.(running) ?? Promise.resolve()).finally(stop);
    },
  });
  await work;
  return { code, stdout, stderr };
}
