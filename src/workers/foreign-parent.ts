/**
 * A process that node starts with NODE_UNIQUE_ID set is a cluster worker: Sigil's worker takes its keys, configuration and
 * evidence from its parent over the IPC channel (NODE_CHANNEL_FD). Only a Sigil primary running this same program may be
 * that parent; any other program could hand a measured worker keys it knows. Node removes both variables from the
 * environment at start, so they are read here from what they leave behind (cluster.isWorker, process.channel).
 */
import { readFileSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { measuredEnvironment } from '../attestation/runtime-options.ts';

/** Why `sigil serve`, not being a worker, must not run with an IPC channel to its parent; undefined when it has none. */
export function foreignChannelProblem(channel: unknown = process.channel): string | undefined {
  if (channel === undefined) return undefined;
  return (
    'refusing to start: sigil serve was given an IPC channel to its parent (NODE_CHANNEL_FD, as child_process.fork or a process ' +
    "manager's fork mode does), and only Sigil's own workers talk to their parent. Start it as a plain process."
  );
}

const environOf = (pid: number): Record<string, string> =>
  Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter((entry) => entry.includes('='))
      .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );

/** How the parent differs from the Sigil primary a worker of this program must have; undefined when it is one. */
function parentDifference(ppid: number): string | undefined {
  const exe = (pid: number | 'self') => statSync(`/proc/${pid}/exe`);
  const [ours, theirs] = [exe('self'), exe(ppid)];
  if (ours.dev !== theirs.dev || ours.ino !== theirs.ino) return `it runs ${readlinkSync(`/proc/${ppid}/exe`)}, not this node binary`;
  // A worker is forked with its primary's node options, script and arguments (node:cluster), so the parent's command line is this one.
  const command = readFileSync(`/proc/${ppid}/cmdline`, 'utf8').split('\0').slice(1, -1);
  const n = process.execArgv.length;
  const script = command[n];
  const sameScript = script !== undefined && realpathSync(resolve(readlinkSync(`/proc/${ppid}/cwd`), script)) === realpathSync(process.argv[1] ?? '');
  if (!isDeepStrictEqual(command.slice(0, n), process.execArgv) || !sameScript || !isDeepStrictEqual(command.slice(n + 1), process.argv.slice(2)))
    return `its command line (${command.join(' ')}) is not this program's`;
  if (!isDeepStrictEqual(measuredEnvironment(environOf(ppid)), measuredEnvironment(process.env)))
    return 'its measured environment (NODE_OPTIONS, LD_PRELOAD, ...) differs from the one it gave this worker';
  return undefined;
}

/** Why this cluster worker must not serve: its parent is not a Sigil primary of the same program; undefined when it is (or off Linux, where /proc cannot tell). */
export function foreignPrimaryProblem(ppid: number = process.ppid): string | undefined {
  if (process.platform !== 'linux') return undefined;
  let difference: string | undefined;
  try {
    difference = parentDifference(ppid);
  } catch (err) {
    difference = `it cannot be inspected (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  }
  if (difference === undefined) return undefined;
  return (
    `refusing to serve as a cluster worker (NODE_UNIQUE_ID is set): the parent process ${ppid} is not a Sigil primary running this ` +
    `same program (${difference}), and a worker takes its keys, configuration and evidence from its parent.`
  );
}
