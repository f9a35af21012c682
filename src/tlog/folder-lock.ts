import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, readlinkSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { SigilError } from '../protocol/sigil-error.ts';

/** A log folder another sequencer holds: two would append different entries at the same indexes and fork the log. */
export class LogFolderBusy extends SigilError<'ERR_LOG_FOLDER_BUSY'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_LOG_FOLDER_BUSY', message, options);
  }
}

interface Holder {
  pid: number;
  host: string;
  /** The holder's pid namespace (`pid:[inode]` of /proc/self/ns/pid): a pid means a process only within its namespace. */
  pidns?: string;
  /** Random per start: whether the lock is still this start's own, which pid and host cannot tell after a takeover. */
  token?: string;
  since: string;
}

/** The log folder held by this start: `held` says whether the lock is still its own; `release` gives it back. */
export interface FolderLock {
  held(): boolean;
  release(): void;
}

export interface FolderLockTiming {
  /** The holder touches its lock this often. */
  heartbeatMs?: number;
  /** A lock untouched this long is a holder gone (a crash, another host's, a paused process) and is taken over. */
  staleMs?: number;
}

const LOCK = 'lock';
/** The tokens of the locks this process holds now: a lock naming this pid with another token was left by an earlier holder here. */
const heldHere = new Set<string>();
const HEARTBEAT_MS = 10_000;
export const LOCK_STALE_MS = 30_000;

/** Whether process `pid` runs in this pid namespace (EPERM: it does, as another user). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** This process's pid namespace, or undefined where /proc does not say (not Linux). */
function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

function readHolder(path: string): Holder | undefined {
  try {
    const holder = JSON.parse(readFileSync(path, 'utf8')) as Partial<Holder>;
    if (typeof holder.pid !== 'number' || typeof holder.host !== 'string') return undefined;
    return {
      pid: holder.pid,
      host: holder.host,
      since: String(holder.since),
      ...(typeof holder.pidns === 'string' ? { pidns: holder.pidns } : {}),
      ...(typeof holder.token === 'string' ? { token: holder.token } : {}),
    };
  } catch {
    return undefined;
  }
}

/**
 * Takes the log folder for this process (docs/log.md, "On disk"): `lock` is created exclusively, names the pid, pid
 * namespace and host of the Sigil that keeps the log and a random token of this start, and is touched every 10 s
 * while it does. A lock is taken over when its process of this host and pid namespace no longer runs (a crash, a
 * kill) or when nobody touched it for 30 s (a holder gone on another host, in another container, or paused); a live
 * one refuses the folder, saying who holds it. The holder learns of a takeover from `held()`, which the sequencer
 * asks before and after each batch (fencing).
 */
export function lockLogFolder(dir: string, timing: FolderLockTiming = {}): FolderLock {
  const staleMs = timing.staleMs ?? LOCK_STALE_MS;
  mkdirSync(dir, { recursive: true });
  const path = join(dir, LOCK);
  const pidns = pidNamespace();
  const token = randomBytes(16).toString('hex');
  const mine: Holder = {
    pid: process.pid,
    host: hostname(),
    ...(pidns === undefined ? {} : { pidns }),
    token,
    since: new Date().toISOString(),
  };
  const held = () => readHolder(path)?.token === token;
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, JSON.stringify(mine) + '\n', { flag: 'wx' });
      // Two starts taking over one stale lock at once: only the one whose lock is there goes on.
      if (!held()) throw new LogFolderBusy(`${dir} was taken by another Sigil starting at the same time`);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
    }
    const holder = readHolder(path);
    const untouched = Date.now() - statSync(path).mtimeMs > staleMs;
    // A pid of another pid namespace (another container on this host name) says nothing here: only staleness counts.
    const visible = holder !== undefined && holder.host === mine.host && (holder.pidns ?? pidns) === pidns;
    const ended = visible && (holder.pid === process.pid ? holder.token !== undefined && !heldHere.has(holder.token) : !running(holder.pid));
    if (!(untouched || ended)) {
      const who =
        holder === undefined
          ? 'an unreadable lock'
          : `the Sigil with pid ${holder.pid} on host ${holder.host}${holder.pidns !== undefined && holder.pidns !== pidns ? ` (another pid namespace, ${holder.pidns})` : ''} (since ${holder.since})`;
      throw new LogFolderBusy(
        `${dir} is kept by ${who}: two Sigils appending to one log would fork it. Stop the other one or give this one its own transparency_log.dir; a lock nobody refreshes for ${staleMs / 1000} s is taken over`,
      );
    }
    unlinkSync(path);
  }
  heldHere.add(token);
  const heartbeat = setInterval(() => {
    try {
      // Never refresh a lock another Sigil took over: that would keep it from ever going stale.
      if (!held()) return clearInterval(heartbeat);
      const now = new Date();
      utimesSync(path, now, now);
    } catch {
      // A folder gone or read-only now: the next batch's write says so.
    }
  }, timing.heartbeatMs ?? HEARTBEAT_MS);
  heartbeat.unref();
  return {
    held,
    release: () => {
      clearInterval(heartbeat);
      heldHere.delete(token);
      try {
        if (held()) unlinkSync(path);
      } catch {
        // A read-only or vanished folder: the lock left behind names an ended holder, which the next start takes over.
      }
    },
  };
}
