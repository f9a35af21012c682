import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { teeSseStream } from '../../src/proxy/sse-relay.ts';

let server: Server;
let url = '';
let source: Readable;

beforeAll(async () => {
  server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    source = new Readable({ read() {} });
    void teeSseStream({ source, sink: res, rewriteModel: 'catalogue-id', forReceipt: true, maxEventBytes: 1024 * 1024 }).then(() => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('teeSseStream in rewrite mode', () => {
  it('sends a line whose CRLF is split across engine chunks at once, not with the next chunk', async () => {
    const reader = (await fetch(url)).body!.getReader();
    source.push(Buffer.from('data: {"id":"c1","model":"engine-name","choices":[]}\r'));
    const first = Buffer.from((await reader.read()).value!).toString();
    expect(first).toBe('data: {"id":"c1","model":"catalogue-id","choices":[]}\r');
    source.push(Buffer.from('\n\r\ndata: [DONE]\r\n\r\n'));
    source.push(null);
    let rest = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += Buffer.from(value).toString();
    }
    expect(rest).toBe('\n\r\ndata: [DONE]\r\n\r\n');
  });
});
