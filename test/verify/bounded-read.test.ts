import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { readBounded, readDeadline, readResponseBounded, type BoundedReadError } from '../../src/verify/bounded-read.ts';

const MiB = 1024 * 1024;
const servers: Server[] = [];
const open = new Set<ServerResponse>();

afterEach(async () => {
  for (const res of open) res.destroy();
  open.clear();
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A server whose one route `serve` answers; returns its base URL. */
async function serving(serve: (res: ServerResponse) => void): Promise<string> {
  const server = createServer((_req, res) => {
    open.add(res);
    serve(res);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** Streams `total` bytes in 64 KiB chunks, honouring back-pressure, without ever holding them. */
function streamBytes(res: ServerResponse, total: number, declare: boolean): void {
  res.writeHead(200, declare ? { 'content-length': String(total) } : {});
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  let sent = 0;
  const pump = (): void => {
    while (sent < total) {
      sent += chunk.byteLength;
      if (!res.write(chunk)) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  pump();
}

async function failure(promise: Promise<unknown>): Promise<BoundedReadError> {
  return promise.then(
    () => {
      throw new Error('the read succeeded');
    },
    (err: unknown) => err as BoundedReadError,
  );
}

describe('a bounded read', () => {
  it('returns a body within its cap whole', async () => {
    const url = await serving((res) => res.end('{"ok":true}'));
    const body = await readResponseBounded(await fetch(url), { what: 'the document', maxBytes: 11 });
    expect(body.toString()).toBe('{"ok":true}');
  });

  it('refuses a 100 MB body streamed without a length once it passes the cap, naming the thing and the cap', async () => {
    const url = await serving((res) => streamBytes(res, 100_000_000, false));
    const err = await failure(readResponseBounded(await fetch(url), { what: 'the attestation document', maxBytes: 4 * MiB }));
    expect(err.code).toBe('ERR_READ_TOO_LARGE');
    expect(err.limit).toBe('bytes');
    expect(err.message).toBe('the attestation document is larger than 4 MiB, the most accepted');
  });

  it('refuses a declared Content-Length above the cap before reading', async () => {
    const url = await serving((res) => streamBytes(res, 100_000_000, true));
    const err = await failure(readResponseBounded(await fetch(url), { what: 'the log tile', maxBytes: 8192 }));
    expect(err.message).toBe('the log tile is larger than 8 KiB, the most accepted');
  });

  it('reads a Node stream (undici.request) under the same cap', async () => {
    const url = await serving((res) => streamBytes(res, 100_000_000, false));
    const { body } = await request(url);
    const err = await failure(readBounded(body, { what: 'the answer', maxBytes: MiB }));
    expect(err.code).toBe('ERR_READ_TOO_LARGE');
    expect(body.destroyed).toBe(true);
  });

  it('ends a body that drips one byte and then stalls at the deadline, with the deadline named', async () => {
    const url = await serving((res) => {
      res.writeHead(200);
      res.write('{');
    });
    const deadline = readDeadline(500);
    const response = await fetch(url, { signal: deadline.signal });
    const err = await failure(readResponseBounded(response, { what: 'the attestation document', maxBytes: MiB, deadline }));
    expect(err.code).toBe('ERR_READ_DEADLINE');
    expect(err.limit).toBe('deadline');
    expect(err.message).toBe('the attestation document did not arrive within 0.5 s, the deadline for it');
  });

  it('ends a Node stream that stalls at the deadline even when nothing aborts the socket', async () => {
    const url = await serving((res) => {
      res.writeHead(200);
      res.write('x');
    });
    const { body } = await request(url);
    const err = await failure(readBounded(body, { what: 'the checkpoint', maxBytes: MiB, deadline: readDeadline(300) }));
    expect(err.message).toBe('the checkpoint did not arrive within 0.3 s, the deadline for it');
    expect(body.destroyed).toBe(true);
  });
});
