import { mkdirSync, readFileSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

/** A log folder another sequencer holds: two would append different entries at the same indexes and fork the log. */
export class LogFolderBusy extends Error {}

interface Holder {
  pid: number;
  host: string;
  since: string;
}

const LOCK = 'lock';
/** The holder touches its lock this often; a lock untouched for LOCK_STALE_MS is a holder gone (a crash, another host's). */
const HEARTBEAT_MS = 10_000;
export const LOCK_STALE_MS = 30_000;

/** Whether process `pid` runs on this host (EPERM: it does, as another user). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readHolder(path: string): Holder | undefined {
  try {
    const holder = JSON.parse(readFileSync(path, 'utf8')) as Partial<Holder>;
    return typeof holder.pid === 'number' && typeof holder.host === 'string' ? { pid: holder.pid, host: holder.host, since: String(holder.since) } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Takes the log folder for this process (docs/log.md, "On disk"): `lock` is created exclusively, names the pid and
 * host of the Sigil that keeps the log, and is touched every 10 s while it does. A lock is taken over when its
 * process of this host no longer runs (a crash, a kill) or when nobody touched it for 30 s (a holder gone on another
 * host: a container restarted with the same volume); a live one refuses the folder, saying who holds it. Returns
 * the release, for a clean stop.
 */
export function lockLogFolder(dir: string): () => void {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, LOCK);
  const mine: Holder = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, JSON.stringify(mine) + '\n', { flag: 'wx' });
      // Two starts taking over one stale lock at once: only the one whose lock is there goes on.
      if (readHolder(path)?.pid !== process.pid) throw new LogFolderBusy(`${dir} was taken by another Sigil starting at the same time`);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
    }
    const holder = readHolder(path);
    const untouched = Date.now() - statSync(path).mtimeMs > LOCK_STALE_MS;
    const ended = holder !== undefined && holder.host === mine.host && holder.pid !== process.pid && !running(holder.pid);
    const stale = untouched || ended;
    if (!stale) {
      const who = holder === undefined ? 'an unreadable lock' : `the Sigil with pid ${holder.pid} on host ${holder.host} (since ${holder.since})`;
      throw new LogFolderBusy(
        `${dir} is kept by ${who}: two Sigils appending to one log would fork it. Stop the other one or give this one its own transparency_log.dir; a lock nobody refreshes for ${LOCK_STALE_MS / 1000} s is taken over`,
      );
    }
    unlinkSync(path);
  }
  const heartbeat = setInterval(() => {
    try {
      const now = new Date();
      utimesSync(path, now, now);
    } catch {
      // A folder gone or read-only now: the next batch's write says so; the lock only guards starts.
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();
  return () => {
    clearInterval(heartbeat);
    if (readHolder(path)?.pid === process.pid) unlinkSync(path);
  };
}
