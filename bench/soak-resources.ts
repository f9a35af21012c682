import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** What one process holds at a moment: resident memory and sockets. */
export interface ResourceSnapshot {
  label: string;
  rssMb: number;
  /** File descriptors that are sockets (listening, connected or half-closed). */
  socketFds: number;
  /** Of those, TCP connections in state ESTABLISHED. */
  established: number;
  /** Of those, TCP connections in any other state but LISTEN (CLOSE_WAIT, FIN_WAIT, TIME_WAIT...). */
  closing: number;
}

const TCP_STATES: Record<string, string> = { '01': 'ESTABLISHED', '0A': 'LISTEN' };

/** Inode to TCP state, from /proc/net/tcp and tcp6 (loopback sockets of every process). */
function tcpStates(): Map<string, string> {
  const states = new Map<string, string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      states.set(cols[9]!, TCP_STATES[cols[3]!] ?? cols[3]!);
    }
  }
  return states;
}

/** Reads RSS and the sockets of `pid` from /proc (Linux only). */
export function snapshot(pid: number, label: string): ResourceSnapshot {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const states = tcpStates();
  let socketFds = 0;
  let established = 0;
  let closing = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target = '';
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
    if (inode === undefined) continue;
    socketFds++;
    const state = states.get(inode);
    if (state === 'ESTABLISHED') established++;
    else if (state !== undefined && state !== 'LISTEN') closing++;
  }
  return { label, rssMb: Math.round((rssKb / 1024) * 10) / 10, socketFds, established, closing };
}
