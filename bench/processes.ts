/** Child processes of the benchmark: spawn, wait for a port, pin to a core, read CPU time and RSS from /proc, stop. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { openSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';

const CLOCK_TICKS_PER_S = 100;
export const hasTaskset = spawnSync('taskset', ['--version']).status === 0;

export interface Spawned {
  child: ChildProcess;
  pid: number;
  log: string;
}

const started = new Set<ChildProcess>();

export function spawnLogged(command: string, args: string[], logFile: string, options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Spawned {
  const fd = openSync(logFile, 'a');
  const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', fd, fd] });
  if (child.pid === undefined) throw new Error(`could not start ${command}`);
  started.add(child);
  child.once('exit', () => started.delete(child));
  return { child, pid: child.pid, log: logFile };
}

/** Ends one child we started: SIGTERM (or the given signal), then SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Last resort on an unexpected exit of the runner: kill every child still running, one by one by pid. */
export function killAllStarted(): void {
  for (const child of started) child.kill('SIGKILL');
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function waitForPort(port: number, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child && (child.exitCode !== null || child.signalCode !== null))
      throw new Error(`process exited with ${child.exitCode ?? child.signalCode} before listening`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listened on 127.0.0.1:${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Direct children of a process (nginx's workers), read from /proc. */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === pid) out.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

/** Pins a process and all its threads to one core (no-op without taskset). */
export function pin(pid: number, core: number): void {
  if (hasTaskset) spawnSync('taskset', ['-a', '-cp', String(core), String(pid)], { stdio: 'ignore' });
}

/** User + system CPU time of the processes, in µs. */
export function cpuMicros(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone
    }
  }
  return (ticks * 1e6) / CLOCK_TICKS_PER_S;
}

/** Resident set size of the processes, in MB. */
export function rssMb(pids: readonly number[]): number {
  let kb = 0;
  for (const pid of pids) {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) kb += Number(m[1]);
    } catch {
      // gone
    }
  }
  return kb / 1024;
}

/**
 * Runs a benchmark's main to its exit code: every process it started is killed on Ctrl-C, on exit and
 * on failure (logged with its stack), so no engine or proxy outlives the run.
 */
export function runBenchmark(main: () => Promise<number>, log: (msg: string) => void): void {
  process.on('SIGINT', () => {
    killAllStarted();
    process.exit(130);
  });
  process.on('exit', () => killAllStarted());
  main().then(
    (code) => process.exit(code),
    (err: Error) => {
      log(`failed: ${err.stack ?? err.message}`);
      killAllStarted();
      process.exit(1);
    },
  );
}
