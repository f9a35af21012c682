import type { ChildProcess } from 'node:child_process';

/** Kills a server the tests started (SIGKILL: a crash, not a shutdown) and resolves once it has exited; nothing to do if it already has. */
export async function killChild(proc: ChildProcess | undefined): Promise<void> {
  if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill('SIGKILL');
  await exited;
}
