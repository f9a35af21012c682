import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { fetchCheckpoint, verifyLogConsistency, verifyWholeLog, type TrustedLog } from '../../../src/verify/tlog/log-client.ts';
import type { VerifiedCheckpoint } from '../../../src/protocol/tlog/checkpoint.ts';
import type { NoteVerifier } from '../../../src/protocol/tlog/note.ts';

/** A log server whose resources `serve` answers: what a hostile mirror of the log can send a verifier. */
const servers: Server[] = [];
const open = new Set<ServerResponse>();
const timers = new Set<NodeJS.Timeout>();

afterEach(async () => {
  for (const t of timers) clearInterval(t);
  timers.clear();
  for (const res of open) res.destroy();
  open.clear();
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

async function logAt(serve: (path: string, res: ServerResponse) => void, deadlineMs?: number): Promise<TrustedLog> {
  const server = createServer((req, res) => {
    open.add(res);
    serve((req.url ?? '').replace(/^\/log\//, ''), res);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/log`;
  return { url, origin: 'example/log', key: {} as NoteVerifier, ...(deadlineMs === undefined ? {} : { deadlineMs }) };
}

function streamMegabytes(res: ServerResponse, megabytes: number): void {
  res.writeHead(200, { 'content-type': 'text/plain' });
  const chunk = Buffer.alloc(64 * 1024, 0x41);
  let sent = 0;
  const pump = (): void => {
    while (sent < megabytes * 1_000_000 && !res.destroyed) {
      sent += chunk.byteLength;
      if (!res.write(chunk)) return void res.once('drain', pump);
    }
    res.end();
  };
  pump();
}

const message = (promise: Promise<unknown>) =>
  promise.then(
    () => 'resolved',
    (err: Error & { code?: string }) => `${err.code}: ${err.message}`,
  );

describe('the log verifier reads a log within bounds', () => {
  it('refuses a checkpoint of 100 MB once it passes 64 KiB', async () => {
    const log = await logAt((_path, res) => streamMegabytes(res, 100));
    expect(await message(fetchCheckpoint(log))).toBe(
      `ERR_TLOG_FETCH: GET ${log.url}/checkpoint failed: the log's checkpoint is larger than 64 KiB, the most accepted`,
    );
  });

  it('refuses a tile larger than 256 hashes', async () => {
    const log = await logAt((path, res) => {
      if (path.startsWith('tile/entries/')) return void res.writeHead(200).end(Buffer.concat([Buffer.of(0, 32), Buffer.alloc(32)]));
      res.writeHead(200).end(Buffer.alloc(256 * 32 + 1));
    });
    const checkpoint = { size: 1, root: Buffer.alloc(32) } as VerifiedCheckpoint;
    expect(await message(verifyWholeLog(log, checkpoint))).toBe(
      `ERR_TLOG_FETCH: GET ${log.url}/tile/0/000.p/1 failed: the log's tile/0/000.p/1 is larger than 8 KiB, the most accepted`,
    );
  });

  it('ends a checkpoint that drips a byte at a time at the deadline', async () => {
    const log = await logAt((_path, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      // Each byte comes well within any per-read timeout; only the request's deadline ends this body.
      timers.add(setInterval(() => res.write('x'), 100));
    }, 1000);
    expect(await message(fetchCheckpoint(log))).toBe(
      `ERR_TLOG_FETCH: GET ${log.url}/checkpoint failed: the log's checkpoint did not arrive within 1 s, the deadline for it`,
    );
  });

  it('refuses a consistency proof that does not come as JSON', async () => {
    const log = await logAt((_path, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('{"proof":[]}'));
    const root = Buffer.alloc(32);
    expect(await message(verifyLogConsistency(log, { size: 1, root }, { size: 2, root }))).toBe(
      `ERR_TLOG_FETCH: GET ${log.url}/consistency?from=1&to=2 came as "text/html", not application/json`,
    );
  });
});
