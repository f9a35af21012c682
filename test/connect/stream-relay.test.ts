import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_RELAYED_EVENT_BYTES, relayEventStream } from '../../src/connect/stream-relay.ts';
import { waitFor } from '../support/wait-for.ts';

/** What the attested client hands connect: a stream the test feeds chunk by chunk. */
function feed(): { body: ReadableStream<Uint8Array>; push(text: string | Uint8Array): void; end(): void; cancelled: () => boolean } {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    start: (c) => {
      controller = c;
    },
    cancel: () => {
      cancelled = true;
    },
  });
  return {
    body,
    push: (chunk) => controller.enqueue(typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk),
    end: () => controller.close(),
    cancelled: () => cancelled,
  };
}

let server: Server | undefined;

/** A loopback server relaying `body` to whoever asks, as `sigil connect` relays to the app. */
async function relayOf(body: ReadableStream<Uint8Array>): Promise<string> {
  server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    void relayEventStream(body, res);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', () => resolve()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

afterEach(async () => {
  await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
  server = undefined;
});

/** Reads the app's stream as it arrives: `text()` is what came so far. */
async function appReads(url: string): Promise<{ text: () => string; done: Promise<void> }> {
  const reader = (await fetch(url)).body!.getReader();
  let text = '';
  const done = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      text += Buffer.from(value).toString();
    }
  })();
  return { text: () => text, done };
}

const RECEIPT = ': receipt eyJhbGciOiJFUzI1NiJ9.e30.c2ln';

describe('relayEventStream (sigil connect)', () => {
  it('relays events ended by a bare CR as each arrives, holds [DONE], and drops the receipt comment', async () => {
    const service = feed();
    const app = await appReads(await relayOf(service.body));
    service.push('data: {"n":1}\r\r');
    expect(await waitFor('the first event at the app', () => app.text() === 'data: {"n":1}\r\r')).toBe(true);
    service.push('data: {"n":2}\r\rdata: [DONE]\r\r');
    expect(await waitFor('the second event at the app', () => app.text() === 'data: {"n":1}\r\rdata: {"n":2}\r\r')).toBe(true);
    service.push(`${RECEIPT}\r\r`);
    service.end();
    await app.done;
    expect(app.text()).toBe('data: {"n":1}\r\rdata: {"n":2}\r\rdata: [DONE]\r\r');
  });

  it('cuts events on LF, CRLF and a CRLF split across chunks alike', async () => {
    const service = feed();
    const app = await appReads(await relayOf(service.body));
    service.push('data: {"n":1}\n\ndata: {"n":2}\r\n\r');
    service.push('\nevent: response.completed\r\ndata: {"type":"response.completed"}\r\n\r\n');
    service.push(`${RECEIPT}\n\n`);
    service.end();
    await app.done;
    expect(app.text()).toBe('data: {"n":1}\n\ndata: {"n":2}\r\n\r\nevent: response.completed\r\ndata: {"type":"response.completed"}\r\n\r\n');
  });

  it('ends the stream with an error event, and stops the service stream, when an event never ends within the cap', async () => {
    const service = feed();
    const app = await appReads(await relayOf(service.body));
    service.push('data: {"n":1}\n\n');
    const line = new Uint8Array(1024 * 1024).fill(0x61);
    for (let sent = 0; sent <= MAX_RELAYED_EVENT_BYTES; sent += line.length) service.push(line);
    await app.done;
    const [first, error] = app.text().split('\n\n');
    expect(first).toBe('data: {"n":1}');
    expect(JSON.parse(error!.replace(/^data: /, ''))).toEqual({
      error: {
        message: `The service sent a stream event larger than ${MAX_RELAYED_EVENT_BYTES} bytes; sigil connect ended the stream.`,
        type: 'upstream_error',
        param: null,
        code: 'upstream_bad_response',
      },
    });
    expect(service.cancelled()).toBe(true);
  });
});
