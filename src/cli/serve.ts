import cluster from 'node:cluster';
import { existsSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { addKey } from '../auth/keys-file.ts';
import type { LoadedConfig } from '../config/load.ts';
import { servingProcesses } from '../config/workers.ts';
import { startSigil, type RunningSigil } from '../http/start.ts';
import type { AppContext } from '../http/context.ts';
import { enginesAwaited, waitingFor, whenEnginesUp } from '../http/engine-readiness.ts';
import { CONFIG_OPTION, readConfigOrExit } from './config-arg.ts';
import { parseCommandLine, refuseUsage, type CommandSpec } from './command-line.ts';
import { UsageError } from './cli-errors.ts';
import { applyListenOverride, listenOverride, listenSource, type ListenOverride } from './listen-override.ts';
import { shutdownDrainMs } from '../config/shutdown-drain.ts';
import { runPrimary } from '../workers/primary.ts';
import { runWorker } from '../workers/worker.ts';
import { foreignChannelProblem, foreignPrimaryProblem } from '../workers/foreign-parent.ts';

/**
 * Development convenience: with no hardware TEE and no keys file yet, make the first key, to be shown
 * once on the terminal (not in the log) when Sigil is ready, so a fresh checkout works end to end. A
 * start that fails removes the file again, so the key is never shown for a Sigil that did not start.
 */
function ensureDevelopmentKey(config: LoadedConfig): { notice: string; file: string } | undefined {
  if (config.attestation.provider !== 'none' || existsSync(config.auth.keys_file)) return undefined;
  const { key, id } = addKey(config.auth.keys_file, 'first-start');
  const notice =
    `\nNo API keys yet, so Sigil made one (id ${id}, hash stored in ${config.auth.keys_file}).\n` +
    `It is shown this once; use it as 'Authorization: Bearer <key>':\n\n    ${key}\n\n`;
  return { notice, file: config.auth.keys_file };
}

/** The one plain line a person waits for. */
function readyLine(url: string): string {
  return `Sigil is ready at ${url} - open it for the trust page\n`;
}

/**
 * Says "ready" only when every model has an engine that answers: else that Sigil listens and which engines it waits
 * for (name, URL, cause), then the ready line once the health checks find them answering.
 */
function announce(url: string, ctx: AppContext, first: string): void {
  const awaited = enginesAwaited(ctx.catalogue, ctx.upstreams);
  if (awaited.length === 0) {
    process.stderr.write(first + readyLine(url));
    return;
  }
  const waiting = awaited.map((u) => waitingFor(u.name, u.url, u.health.cause ?? 'not reachable')).join('; ');
  process.stderr.write(`${first}Sigil is listening at ${url}; ${waiting}\n`);
  void whenEnginesUp(ctx.catalogue, ctx.upstreams).then(() => process.stderr.write(readyLine(url)));
}

/**
 * Binds the configured port for a moment before anything else happens, so that a port in use is found
 * first, not after a key was made and the engine started; the server binds it again right after.
 */
async function portProblem(config: LoadedConfig, override: ListenOverride): Promise<string | undefined> {
  const { host, port } = config.listen;
  if (port === 0) return undefined;
  const probe = createServer();
  const error = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    probe.once('error', resolve);
    probe.listen(port, host, () => resolve(undefined));
  });
  if (error === undefined) {
    await new Promise((resolve) => probe.close(resolve));
    return undefined;
  }
  const where = `port ${port} on ${host} (from ${listenSource(config, override)})`;
  if (error.code === 'EADDRINUSE')
    return `${where} is already in use, perhaps by another Sigil. Stop that process, or start on another port: sigil serve --port N (0: any free port).`;
  if (error.code === 'EACCES') return `${where} needs privileges this user lacks. Use a port above 1023: sigil serve --port N.`;
  if (error.code === 'EADDRNOTAVAIL') return `${where} cannot be used: this machine has no address ${host}. Use one it has: sigil serve --host 127.0.0.1.`;
  return `${where} cannot be used: ${error.code ?? error.message}.`;
}

export const command = {
  name: 'serve',
  summary: 'Runs the proxy. With no upstream configured, starts the built-in engine with a generated demo model.',
  options: {
    config: CONFIG_OPTION,
    host: { type: 'string', value: 'HOST', description: "listen on HOST instead of the config's listen.host", env: 'SIGIL_HOST' },
    port: { type: 'string', value: 'PORT', description: "listen on PORT instead of the config's listen.port; 0: any free port", env: 'SIGIL_PORT' },
  },
  notes: `API keys: their hashes live in the file auth.keys_file names (config/sigil.yaml: .sigil/api-keys);
\`sigil keys add\` adds one and prints it once; a development start (attestation.provider none) with
no keys file yet makes one and prints it once.
SIGHUP reloads the keys file and the catalogue; SIGTERM or Ctrl-C stops (docs/operations.md).`,
} as const satisfies CommandSpec;

export async function run(argv: string[]): Promise<number> {
  // A worker forked by the primary: it gets its configuration and keys over IPC, not from argv; so only from a Sigil primary.
  // Anything else reads its command line first, so that --help and a refused line answer wherever sigil runs.
  const line = cluster.isWorker ? undefined : parseCommandLine(command, argv);
  if (typeof line === 'number') return line;
  const foreign = cluster.isWorker ? foreignPrimaryProblem() : foreignChannelProblem();
  if (foreign !== undefined) {
    process.stderr.write(`sigil: ${foreign}\n`);
    // The cluster channel keeps a worker alive, and a worker that disconnects exits 0: end here, saying nothing more to that parent.
    if (cluster.isWorker) process.exit(1);
    return 1;
  }
  if (line === undefined) return runWorker();
  let override: ListenOverride;
  try {
    override = listenOverride(line);
  } catch (err) {
    if (err instanceof UsageError) return refuseUsage(command, err.message);
    throw err;
  }
  const configured = readConfigOrExit(line.values.config);
  if (configured === undefined) return 1;
  const config = applyListenOverride(configured, override);
  const problem = await portProblem(config, override);
  if (problem !== undefined) {
    process.stderr.write(`sigil: ${problem}\n`);
    return 1;
  }
  const madeKey = ensureDevelopmentKey(config);
  const ready = (url: string, ctx: AppContext) => announce(url, ctx, madeKey?.notice ?? '');
  const workers = servingProcesses(config);
  if (workers > 1) {
    try {
      return await runPrimary(config, workers, ready);
    } catch (err) {
      if (madeKey !== undefined) rmSync(madeKey.file, { force: true });
      process.stderr.write(`sigil: ${(err as Error).message}\n`);
      return 1;
    }
  }

  // SIGHUP is handled from the start: one sent as Sigil says it listens reloads, and one sent earlier is not fatal.
  let sigil: RunningSigil | undefined;
  const reload = () => void sigil?.reload();
  process.on('SIGHUP', reload);
  try {
    sigil = await startSigil(config);
  } catch (err) {
    process.off('SIGHUP', reload);
    if (madeKey !== undefined) rmSync(madeKey.file, { force: true });
    process.stderr.write(`sigil: ${(err as Error).message}\n`);
    return 1;
  }
  ready(sigil.url, sigil.state.ctx);
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      process.off('SIGHUP', reload);
      void sigil.close(config.limits.shutdown_grace_ms, shutdownDrainMs(config)).then(resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  return 0;
}
