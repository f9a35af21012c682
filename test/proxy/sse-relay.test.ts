import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { teeSseStream, type SseRelayOptions, type SseRelayResult } from '../../src/proxy/sse-relay.ts';

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

/**
 * One stream relayed through the tee on a loopback server: the engine's `chunks` pushed one by one, what the client
 * read, and the tee's result.
 */
async function relayed(chunks: string[], options: Partial<SseRelayOptions> = {}): Promise<{ text: string; result: SseRelayResult }> {
  let result!: Promise<SseRelayResult>;
  const relay = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    const engine = new Readable({ read() {} });
    result = teeSseStream({ source: engine, sink: res, rewriteModel: undefined, forReceipt: true, maxEventBytes: 1024, ...options });
    void result.then(() => res.end());
    for (const chunk of chunks) engine.push(Buffer.from(chunk));
    engine.push(null);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', () => resolve()));
  try {
    const text = await (await fetch(`http://127.0.0.1:${(relay.address() as AddressInfo).port}/`)).text();
    return { text, result: await result };
  } finally {
    await new Promise<void>((resolve) => relay.close(() => resolve()));
  }
}

/** The one error event a failed stream ends with. */
const errorEvent = (message: string) =>
  `data: ${JSON.stringify({ error: { message, type: 'upstream_error', param: null, code: 'upstream_bad_response' } })}\n\n`;
const sha256 = (text: string) => 'sha256:' + createHash('sha256').update(text).digest('hex');

describe('the SSE tee, behaviour by behaviour', () => {
  it('relays events ended by bare CRs as sent, and hashes exactly the bytes the client got', async () => {
    const stream = 'data: {"id":"c1","choices":[]}\r\rdata: [DONE]\r\r';
    const { text, result } = await relayed([stream.slice(0, 9), stream.slice(9)]);
    expect(text).toBe(stream);
    expect(result).toEqual({ complete: true, clientGone: false, responseHash: sha256(stream), completionId: 'c1', droppedReceiptComments: 0 });
  });

  it("drops the engine's receipt comments, counted, and the LF that finished one's CRLF in the next chunk", async () => {
    const { text, result } = await relayed(['data: {"id":"c1"}\n\n: receipt forged\r', '\n:receipt\n\ndata: [DONE]\n\n']);
    expect(text).toBe('data: {"id":"c1"}\n\n\ndata: [DONE]\n\n');
    expect(result.droppedReceiptComments).toBe(2);
  });

  it('relays nothing after the completing event, and ends it with its blank line when the engine does not', async () => {
    expect((await relayed(['data: {"id":"c1"}\r\n\r\ndata: [DONE]\r\n', 'data: more\n\n'])).text).toBe('data: {"id":"c1"}\r\n\r\ndata: [DONE]\r\n\r\n');
    expect((await relayed(['data: {"id":"c1"}\n\ndata: [DONE]'])).text).toBe('data: {"id":"c1"}\n\ndata: [DONE]\n\n');
  });

  it('cuts an engine that goes on past the end for more than one event of bytes, blank lines or not', async () => {
    const { text, result } = await relayed(['data: {"id":"c1"}\n\ndata: [DONE]\n\n', 'data: more\n\n'.repeat(120)]);
    expect(text).toBe(
      'data: {"id":"c1"}\n\ndata: [DONE]\n\n' + errorEvent('The engine sent a stream event larger than 1024 bytes (limits.max_sse_event_bytes).'),
    );
    expect(result).toMatchObject({ complete: false, clientGone: false });
  });

  it('reads the id and usage of a response stream, which ends at response.completed', async () => {
    const completed = 'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r1","usage":{"input_tokens":3,"output_tokens":4}}}\n\n';
    const { text, result } = await relayed(
      ['event: response.created\ndata: {"type":"response.created","response":{"id":"r1"}}\n\n', completed, 'data: late\n\n'],
      {
        completion: 'event',
        readUsage: (e) => {
          const u = e.usage as { input_tokens?: number; output_tokens?: number } | undefined;
          return u?.input_tokens === undefined ? undefined : { prompt_tokens: u.input_tokens, completion_tokens: u.output_tokens ?? 0 };
        },
      },
    );
    expect(text.endsWith(completed)).toBe(true);
    expect(result).toMatchObject({ complete: true, completionId: 'r1', usage: { prompt_tokens: 3, completion_tokens: 4 } });
  });

  it('replaces the model in every event, that value alone, when names differ', async () => {
    const { text } = await relayed(['data: {"id":"c1","model":"engine","x":"model"}\n\ndata: {"model" : "engine"}\n\ndata: [DONE]\n\n'], {
      rewriteModel: 'catalogue',
    });
    expect(text).toBe('data: {"id":"c1","model":"catalogue","x":"model"}\n\ndata: {"model" : "catalogue"}\n\ndata: [DONE]\n\n');
  });

  it('ends the stream with one error event when an event passes maxEventBytes, and when the engine stops before the end', async () => {
    const large = await relayed(['data: {"id":"c1"}\n\n', `data: ${'x'.repeat(1100)}`]);
    expect(large.text).toBe('data: {"id":"c1"}\n\n' + errorEvent('The engine sent a stream event larger than 1024 bytes (limits.max_sse_event_bytes).'));
    expect(large.result).toMatchObject({ complete: false, clientGone: false });
    const cut = await relayed(['data: {"id":"c1"}\n\n']);
    expect(cut.text).toBe('data: {"id":"c1"}\n\n' + errorEvent('The engine ended the stream before it finished.'));
  });
});
