import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { teeSseStream, type SseRelayResult } from '../../src/proxy/sse-relay.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/**
 * Property tests: for any split of an engine's SSE output into TCP chunks (CR, LF and CRLF line
 * endings, multibyte UTF-8 cut anywhere, JSON with any spacing), the relay keeps every byte in order.
 * Pass-through: the client receives the engine's bytes exactly. Rewrite: every event's `model` is the
 * catalogue id and nothing else changes. The message receipt's response_hash covers exactly the bytes
 * received up to `data: [DONE]` and its blank line. Fixed seed, bounded runs.
 */
const SEED = 0x5161_5e5e;
const CATALOGUE_ID = 'renamed';
const ENGINE_NAME = 'engine/renamed';

const sha256 = (bytes: Buffer) => 'sha256:' + createHash('sha256').update(bytes).digest('hex');

type Eol = '\n' | '\r' | '\r\n';

interface EngineStream {
  id: string;
  /** The delta contents, in order. */
  contents: string[];
  bytes: Buffer;
}

/** JSON with `spacing` after every `:` and `,` (engines differ: vLLM compact, others spaced). */
function spacedJson(value: unknown, spacing: string): string {
  if (Array.isArray(value)) return `[${value.map((v) => spacedJson(v, spacing)).join(`,${spacing}`)}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}:${spacing}${spacedJson(v, spacing)}`)
      .join(`,${spacing}`)}}`;
  }
  return JSON.stringify(value);
}

const content = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 6 }),
  fc.constantFrom('😀', '👍🏽', '👨‍👩‍👧', '中文字符', '日本語', 'é', 'e\u0301', '𝄞', '\u2028\u2029', 'a\rb\nc\r\nd', '"\\', ' '),
);

const event = fc.record({
  content,
  spacing: fc.constantFrom('', ' ', '  '),
  eol: fc.constantFrom<Eol>('\n', '\r', '\r\n'),
  spaceAfterData: fc.boolean(),
  comment: fc.boolean(),
});

/** A whole engine stream: chunks, a last chunk with finish_reason, `data: [DONE]` and its blank line. */
function engineStream(model: string) {
  return fc
    .record({
      id: fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 8, maxLength: 24 }),
      events: fc.array(event, { minLength: 1, maxLength: 8 }),
      doneEol: fc.constantFrom<Eol>('\n', '\r', '\r\n'),
    })
    .map(({ id, events, doneEol }): EngineStream => {
      const parts: string[] = [];
      const completionId = `chatcmpl-${id}`;
      events.forEach((e, i) => {
        const last = i === events.length - 1;
        const chunk = {
          id: completionId,
          object: 'chat.completion.chunk',
          created: 1_700_000_000,
          model,
          choices: [{ index: 0, delta: last ? {} : { content: e.content }, finish_reason: last ? 'stop' : null }],
        };
        if (e.comment) parts.push(`: keep-alive${e.eol}`);
        parts.push(`data:${e.spaceAfterData ? ' ' : ''}${spacedJson(chunk, e.spacing)}${e.eol}${e.eol}`);
      });
      parts.push(`data: [DONE]${doneEol}${doneEol}`);
      return { id: completionId, contents: events.slice(0, -1).map((e) => e.content), bytes: Buffer.from(parts.join(''), 'utf8') };
    });
}

/** Cut points that matter: inside every multibyte character, between every CR and LF, plus random ones. */
function interestingCuts(bytes: Buffer): number[] {
  const cuts: number[] = [];
  for (let i = 1; i < bytes.length; i++) {
    const continuation = (bytes[i]! & 0xc0) === 0x80;
    const crlf = bytes[i - 1] === 0x0d && bytes[i] === 0x0a;
    if (continuation || crlf) cuts.push(i);
  }
  return cuts;
}

/** A stream and a split of its bytes into chunks (every byte alone, sometimes). */
function splitStream(model: string) {
  return engineStream(model).chain((stream) => {
    const n = stream.bytes.length;
    const cuts = fc.oneof(
      {
        weight: 6,
        arbitrary: fc
          .tuple(fc.subarray(interestingCuts(stream.bytes)), fc.uniqueArray(fc.integer({ min: 1, max: n - 1 }), { maxLength: 24 }))
          .map(([a, b]) => [...a, ...b]),
      },
      { weight: 1, arbitrary: fc.constant(Array.from({ length: n - 1 }, (_, i) => i + 1)) },
    );
    return cuts.map((points) => {
      const sorted = [...new Set(points)].sort((a, b) => a - b);
      const pieces: Buffer[] = [];
      let from = 0;
      for (const at of [...sorted, n]) {
        pieces.push(stream.bytes.subarray(from, at));
        from = at;
      }
      return { stream, pieces };
    });
  });
}

/** Splits bytes into lines, each with its own terminator (CR, LF or CRLF), as SSE does. */
function lines(bytes: Buffer): Array<{ line: string; eol: string }> {
  const text = bytes.toString('utf8');
  const out: Array<{ line: string; eol: string }> = [];
  const re = /\r\n|\r|\n/g;
  let start = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    out.push({ line: text.slice(start, m.index), eol: m[0] });
    start = m.index + m[0].length;
  }
  if (start < text.length) out.push({ line: text.slice(start), eol: '' });
  return out;
}

const dataPayload = (line: string) => (line.startsWith('data: ') ? line.slice(6) : line.slice(5));

/** Rewrite mode: the same lines and terminators; data events equal after JSON.parse except `model`. */
function expectRewritten(received: Buffer, stream: EngineStream): void {
  const got = lines(received);
  const sent = lines(stream.bytes);
  expect(got.map((l) => l.eol)).toEqual(sent.map((l) => l.eol));
  got.forEach((out, i) => {
    const input = sent[i]!.line;
    if (!input.startsWith('data:') || dataPayload(input) === '[DONE]') {
      expect(out.line).toBe(input);
      return;
    }
    expect(out.line.startsWith('data:')).toBe(true);
    const chunk = JSON.parse(dataPayload(out.line)) as Record<string, unknown>;
    expect(chunk).toEqual({ ...(JSON.parse(dataPayload(input)) as Record<string, unknown>), model: CATALOGUE_ID });
  });
  const deltas = got
    .filter((l) => l.line.startsWith('data:') && dataPayload(l.line) !== '[DONE]')
    .map((l) => (JSON.parse(dataPayload(l.line)) as { choices: Array<{ delta: { content?: string } }> }).choices[0]!.delta.content);
  expect(deltas.slice(0, -1)).toEqual(stream.contents);
}

describe('teeSseStream on a real ServerResponse, fed exact chunk splits', () => {
  let server: Server;
  let url = '';
  let next: { pieces: Buffer[]; rewriteModel: string | undefined; result?: SseRelayResult } | undefined;

  beforeAll(async () => {
    server = createServer((_req, res) => {
      const job = next!;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      const source = new Readable({ read() {} });
      const relayed = teeSseStream({ source, sink: res, rewriteModel: job.rewriteModel, forReceipt: true, maxEventBytes: 1024 * 1024 });
      void (async () => {
        for (const piece of job.pieces) {
          source.push(piece);
          await new Promise((r) => setImmediate(r));
        }
        source.push(null);
        job.result = await relayed;
        res.end();
      })();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  async function relay(pieces: Buffer[], rewriteModel: string | undefined): Promise<{ received: Buffer; result: SseRelayResult }> {
    next = { pieces, rewriteModel };
    const job = next;
    const received = Buffer.from(await (await fetch(url)).arrayBuffer());
    return { received, result: job.result! };
  }

  it('pass-through: the client receives the engine bytes exactly, and the hash covers them', async () => {
    await fc.assert(
      fc.asyncProperty(splitStream('same'), async ({ stream, pieces }) => {
        const { received, result } = await relay(pieces, undefined);
        expect(received.equals(stream.bytes), received.toString('utf8')).toBe(true);
        expect(result).toMatchObject({ complete: true, clientGone: false, completionId: stream.id, responseHash: sha256(stream.bytes) });
      }),
      { seed: SEED, numRuns: 200 },
    );
  });

  it('rewrite: every event carries the catalogue id, everything else identical, hash of what was sent', async () => {
    await fc.assert(
      fc.asyncProperty(splitStream(ENGINE_NAME), async ({ stream, pieces }) => {
        const { received, result } = await relay(pieces, CATALOGUE_ID);
        expectRewritten(received, stream);
        expect(result).toMatchObject({ complete: true, clientGone: false, completionId: stream.id, responseHash: sha256(received) });
      }),
      { seed: SEED, numRuns: 200 },
    );
  });
});

describe('a stream through Sigil, from an engine that writes each chunk in its own TCP segment', () => {
  let engineServer: Server;
  let sigil: TestSigil;
  let pieces: Buffer[] = [];

  beforeAll(async () => {
    engineServer = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.method === 'GET') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              object: 'list',
              data: [
                { id: 'same', object: 'model' },
                { id: ENGINE_NAME, object: 'model' },
              ],
            }),
          );
          return;
        }
        res.socket?.setNoDelay(true);
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.flushHeaders();
        void (async () => {
          // A pause after each write puts it in its own TCP segment; byte-by-byte splits only yield to the loop.
          // real clock: a millisecond between writes is what puts each in a TCP segment of its own
          const segmentGap = () => new Promise((r) => setTimeout(r, 1));
          const pause = pieces.length > 64 ? () => new Promise((r) => setImmediate(r)) : segmentGap;
          for (const piece of pieces) {
            res.write(piece);
            await pause();
          }
          res.end();
        })();
      });
    });
    await new Promise<void>((resolve) => engineServer.listen(0, '127.0.0.1', () => resolve()));
    const port = (engineServer.address() as AddressInfo).port;
    sigil = await startTestSigil({
      upstreams: { raw: { url: `http://127.0.0.1:${port}/v1` } },
      models: [
        { id: 'same', upstream: 'raw' },
        { id: CATALOGUE_ID, upstream_model: ENGINE_NAME, upstream: 'raw' },
      ],
    });
  });

  afterAll(async () => {
    await sigil.close();
    await new Promise<void>((resolve) => engineServer.close(() => resolve()));
  });

  /** Streams a request with a receipt; returns the bytes before the receipt comment and the receipt's claims. */
  async function streamWithReceipt(model: string, split: Buffer[]): Promise<{ received: Buffer; claims: Record<string, unknown> }> {
    pieces = split;
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    const at = body.lastIndexOf(': receipt ');
    expect(at).toBeGreaterThan(0);
    const comment = body.subarray(at).toString('latin1');
    const match = /^: receipt ([\w-]+\.([\w-]+)\.[\w-]+)\n\n$/.exec(comment);
    expect(match, comment).not.toBeNull();
    const claims = JSON.parse(Buffer.from(match![2]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    return { received: body.subarray(0, at), claims };
  }

  it('pass-through: the same bytes, and the message receipt hashes exactly them', async () => {
    await fc.assert(
      fc.asyncProperty(splitStream('same'), async ({ stream, pieces: split }) => {
        const { received, claims } = await streamWithReceipt('same', split);
        expect(received.equals(stream.bytes), received.toString('utf8')).toBe(true);
        expect(claims).toMatchObject({ receipt_type: 'message', completion_id: stream.id, response_hash: sha256(stream.bytes) });
      }),
      { seed: SEED, numRuns: 40 },
    );
  });

  it('rewrite: the catalogue id in every event, content intact, the receipt hashes what the client got', async () => {
    await fc.assert(
      fc.asyncProperty(splitStream(ENGINE_NAME), async ({ stream, pieces: split }) => {
        const { received, claims } = await streamWithReceipt(CATALOGUE_ID, split);
        expectRewritten(received, stream);
        expect(claims).toMatchObject({ receipt_type: 'message', completion_id: stream.id, response_hash: sha256(received) });
      }),
      { seed: SEED, numRuns: 40 },
    );
  });
});
