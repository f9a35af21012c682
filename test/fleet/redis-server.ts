import { spawn, type ChildProcess } from 'node:child_process';
import { createConnection } from 'node:net';
import { freePort } from '../support/free-port.ts';
import { killChild } from '../support/kill-child.ts';
import { waitFor } from '../support/wait-for.ts';

/** A real `redis-server` on a free loopback port, without persistence, for fleet tests. */
export interface TestRedis {
  port: number;
  url: string;
  /** Kills the server (SIGKILL: like a crash); the port stays reserved for `start`. */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
  /** SIGSTOP / SIGCONT: connected but not answering, like an overloaded or partitioned server. */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

async function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export async function startTestRedis(): Promise<TestRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;

  const start = async () => {
    const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    child = proc;
    await waitFor(`redis-server listening on port ${port}`, () => {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode} on port ${port}`);
      return accepts(port);
    });
  };
  const kill = async () => {
    const proc = child;
    child = undefined;
    await killChild(proc);
  };
  await start();
  return { port, url: `redis://127.0.0.1:${port}`, kill, start, stop: kill, pause: () => child?.kill('SIGSTOP'), resume: () => child?.kill('SIGCONT') };
}

/** Redis tests run unless SIGIL_SKIP_REDIS_TESTS=1 says to skip them: a missing redis-server fails them, never skips them silently. */
export function redisTestsSkipped(): boolean {
  return process.env.SIGIL_SKIP_REDIS_TESTS === '1';
}
