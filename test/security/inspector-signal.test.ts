import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startSigilProcess, workerPids, type SigilProcess } from '../support/sigil-process.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { waitFor } from '../support/wait-for.ts';

const running: Array<{ sigil: SigilProcess; engine: TestEngine }> = [];

afterEach(async () => {
  for (const { sigil, engine } of running.splice(0)) {
    for (const pid of workerPids(sigil.child.pid!)) process.kill(pid, 'SIGKILL');
    sigil.child.kill('SIGKILL');
    await engine.close();
  }
});

/** The TCP ports a process listens on: its socket inodes matched against the kernel's tables of listening sockets. */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode !== undefined) inodes.add(inode);
    } catch {
      // closed while we looked
    }
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[3] === '0A' && inodes.has(fields[9]!)) ports.add(parseInt(fields[1]!.split(':')[1]!, 16));
    }
  }
  return [...ports].sort();
}

/** Whether something accepts a connection on 127.0.0.1:port. */
const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

/** Resolves with the first stderr line (from now on) that answers a SIGUSR1 sent to `pid`: ignored, or an inspector starting. */
async function answerToSigusr1(sigil: SigilProcess, pid: number): Promise<string> {
  const from = sigil.stderr.length;
  process.kill(pid, 'SIGUSR1');
  return waitFor(`an answer to SIGUSR1 from pid ${pid}`, () =>
    sigil.stderr.slice(from).find((l) => l.includes(`SIGUSR1 ignored (pid ${pid})`) || /Debugger listening|Starting inspector/.test(l)),
  );
}

describe('SIGUSR1 does not open the inspector', () => {
  it('a served Sigil and each of its workers ignore kill -USR1: no inspector port opens and requests are still served', async () => {
    const engine = await startTestEngine({ modelNames: ['m'] });
    const sigil = await startSigilProcess(engine.baseUrl, { workers: 2 });
    running.push({ sigil, engine });
    const port = Number(new URL(sigil.url).port);
    const primary = sigil.child.pid!;
    const workers = workerPids(primary);
    expect(workers).toHaveLength(2);
    for (const pid of [primary, ...workers]) {
      expect(await answerToSigusr1(sigil, pid)).toBe(`sigil: SIGUSR1 ignored (pid ${pid}): the inspector stays closed`);
      expect(listeningPorts(pid).filter((p) => p !== port)).toEqual([]);
    }
    expect(await accepts(9229)).toBe(false);
    expect(sigil.stderr.filter((l) => /Debugger|inspector/i.test(l) && !l.includes('the inspector stays closed'))).toEqual([]);
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });
});
