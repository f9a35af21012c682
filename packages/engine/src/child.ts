import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface EngineProcessOptions {
  /**
   * The arguments after `node` that run a program answering to `engine --model FILE --host --port ...` (`sigil`'s CLI,
   * whose `engine` command starts this package's server): the engine cannot know where, or in what form, its host runs.
   */
  program: readonly string[];
  modelPath: string;
  threads?: number;
  parallel?: number;
  contextSize?: number;
  /** How long the engine may take to listen and answer /health (default 60 s). */
  startTimeoutMs?: number;
}

export interface EngineProcess {
  /** Base URL of the engine's OpenAI-compatible API, e.g. `http://127.0.0.1:41234` (append `/v1/...`). */
  url: string;
  /** The name the engine reports in /v1/models and in every response's `model`. */
  modelName: string;
  stop(): Promise<void>;
}

const DEFAULT_START_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 5_000;

/**
 * Runs `PROGRAM engine --model PATH --port 0` (`sigil engine`) as a child process on a free loopback port and resolves once
 * it listens and answers /health. The child is killed by stop(), when this process exits, and (through
 * its IPC channel) when this process dies without a chance to say so.
 */
export async function startEngineProcess(opts: EngineProcessOptions): Promise<EngineProcess> {
  const args = [
    ...opts.program,
    'engine',
    '--model',
    opts.modelPath,
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--threads',
    String(opts.threads ?? 1),
    '--parallel',
    String(opts.parallel ?? 2),
    ...(opts.contextSize !== undefined ? ['--context', String(opts.contextSize)] : []),
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let stderrTail = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    process.stderr.write(chunk);
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-2000);
  });

  try {
    const timeoutMs = opts.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    const url = await waitForListening(child, () => stderrTail, timeoutMs);
    await waitForHealth(url, timeoutMs);
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
    return {
      url,
      modelName: models.data[0]!.id,
      stop: async () => {
        process.removeListener('exit', killOnExit);
        await stopChild(child);
      },
    };
  } catch (error) {
    process.removeListener('exit', killOnExit);
    await stopChild(child);
    throw error;
  }
}

function waitForListening(child: ChildProcess, stderrTail: () => string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`the engine did not start within ${timeoutMs / 1000} s`)), timeoutMs);
    const onExit = (code: number | null, signal: string | null) => {
      fail(new Error(`the engine exited (${signal ?? `code ${code}`}) before listening: ${stderrTail().trim()}`));
    };
    const lines = createInterface({ input: child.stdout! });
    function fail(error: Error): void {
      clearTimeout(timer);
      child.removeListener('exit', onExit);
      reject(error);
    }
    child.once('exit', onExit);
    lines.on('line', (line) => {
      const event = parseEvent(line);
      if (event?.event !== 'listening' || typeof event.url !== 'string') return;
      clearTimeout(timer);
      child.removeListener('exit', onExit);
      resolve(event.url);
    });
  });
}

function parseEvent(line: string): { event?: unknown; url?: unknown } | undefined {
  try {
    return JSON.parse(line) as { event?: unknown; url?: unknown };
  } catch {
    return undefined;
  }
}

async function waitForHealth(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await fetch(`${url}/health`).then(
      (res) => res.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`the engine at ${url} never answered /health`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}
