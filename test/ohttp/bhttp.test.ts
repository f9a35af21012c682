import { readFileSync } from 'node:fs';
import { BHttpDecoder, BHttpEncoder } from 'bhttp-js';
import { describe, expect, it } from 'vitest';
import {
  BinaryHttpError,
  BinaryResponseReader,
  decodeRequest,
  decodeResponse,
  encodeRequest,
  encodeResponse,
  indeterminateResponse,
} from '../../src/protocol/bhttp.ts';

const examples = JSON.parse(readFileSync(new URL('../vectors/ohttp/rfc9292-examples.json', import.meta.url), 'utf8')) as Record<string, unknown>;
const hex = (name: string) => Buffer.from(examples[name] as string, 'hex');
const fields = examples.request_fields as Array<[string, string]>;

describe('binary HTTP (RFC 9292): the examples of §5', () => {
  it('reads the known-length request and writes it back byte for byte', () => {
    const request = decodeRequest(hex('known_length_request'));
    expect(request).toEqual({ method: 'GET', scheme: 'https', authority: '', path: '/hello.txt', headers: fields, content: new Uint8Array(0), trailers: [] });
    expect(Buffer.from(encodeRequest(request)).toString('hex')).toBe(examples.known_length_request);
  });

  it('reads the indeterminate-length request, zero padding included, as the same request', () => {
    expect(decodeRequest(hex('indeterminate_length_request'))).toEqual(decodeRequest(hex('known_length_request')));
  });

  it('reads the response with two interim responses and keeps the final one with its content', () => {
    const response = decodeResponse(hex('indeterminate_length_response_with_interim'));
    expect(response.informational.map((r) => r.status)).toEqual([102, 103]);
    expect(response.informational[1]!.headers).toEqual([
      ['link', '</style.css>; rel=preload; as=style'],
      ['link', '</script.js>; rel=preload; as=script'],
    ]);
    expect(response.status).toBe(200);
    expect(response.headers[0]).toEqual(['date', 'Mon, 27 Jul 2009 12:28:53 GMT']);
    expect(Buffer.from(response.content).toString()).toBe('Hello World! My content includes a trailing CRLF.\r\n');
  });

  it('reads the known-length response with a trailer and writes it back byte for byte', () => {
    const response = decodeResponse(hex('known_length_response_with_trailer'));
    expect(response).toMatchObject({ status: 200, headers: [], trailers: [['trailer', 'text']] });
    expect(Buffer.from(response.content).toString()).toBe('This content contains CRLF.\r\n');
    expect(Buffer.from(encodeResponse(response)).toString('hex')).toBe(examples.known_length_response_with_trailer);
  });
});

describe('binary HTTP against an independent implementation (npm bhttp-js)', () => {
  it('bhttp-js reads the request Sigil writes', async () => {
    const body = new TextEncoder().encode('{"model":"m","messages":[{"role":"user","content":"héllo"}]}');
    const ours = encodeRequest({
      method: 'POST',
      scheme: 'https',
      authority: 'sigil.example',
      path: '/v1/chat/completions',
      headers: [
        ['content-type', 'application/json'],
        ['authorization', 'Bearer sk-test'],
      ],
      content: body,
      trailers: [],
    });
    const theirs = new BHttpDecoder().decodeRequest(ours);
    expect(theirs.method).toBe('POST');
    expect(theirs.url).toBe('https://sigil.example/v1/chat/completions');
    expect(theirs.headers.get('authorization')).toBe('Bearer sk-test');
    expect(new Uint8Array(await theirs.arrayBuffer())).toEqual(body);
  });

  it('Sigil reads the request and the response bhttp-js writes', async () => {
    const encoder = new BHttpEncoder();
    const request = await encoder.encodeRequest(
      new Request('https://sigil.example/v1/embeddings', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"input":"x"}' }),
    );
    expect(decodeRequest(request)).toMatchObject({ method: 'POST', scheme: 'https', authority: 'sigil.example', path: '/v1/embeddings' });
    expect(Buffer.from(decodeRequest(request).content).toString()).toBe('{"input":"x"}');
    const response = await encoder.encodeResponse(new Response('{"ok":true}', { status: 201, headers: { 'x-request-id': 'abc' } }));
    const read = decodeResponse(response);
    expect(read.status).toBe(201);
    expect(read.headers).toContainEqual(['x-request-id', 'abc']);
    expect(Buffer.from(read.content).toString()).toBe('{"ok":true}');
  });

  it('bhttp-js reads a streamed (indeterminate-length) response Sigil writes piece by piece', async () => {
    const bytes = Buffer.concat([
      indeterminateResponse.head(200, [['content-type', 'text/event-stream']]),
      indeterminateResponse.chunk(Buffer.from('data: {"a":1}\n\n')),
      indeterminateResponse.chunk(Buffer.from('data: [DONE]\n\n')),
      indeterminateResponse.end(),
    ]);
    const theirs = new BHttpDecoder().decodeResponse(bytes);
    expect(theirs.status).toBe(200);
    expect(theirs.headers.get('content-type')).toBe('text/event-stream');
    expect(await theirs.text()).toBe('data: {"a":1}\n\ndata: [DONE]\n\n');
  });
});

describe('binary HTTP: what a reader refuses', () => {
  const valid = hex('known_length_request');
  it.each([
    ['a framing indicator that is not a request', Buffer.concat([Buffer.of(1), valid.subarray(1)]), /framing indicator 1/],
    ['a message cut inside a field', valid.subarray(0, 30), /ends inside/],
    ['non-zero padding', Buffer.concat([valid, Buffer.of(0, 7)]), /not zero padding/],
    ['an upper-case field name', Buffer.from(valid.toString('hex').replace('757365722d6167656e74', '557365722d6167656e74'), 'hex'), /lower-case token/],
  ])('%s', (_what, bytes, message) => {
    expect(() => decodeRequest(bytes)).toThrow(BinaryHttpError);
    expect(() => decodeRequest(bytes)).toThrow(message);
    expect(() => decodeRequest(bytes)).toThrow(expect.objectContaining({ code: 'ERR_BHTTP_INVALID', name: 'BinaryHttpError' }));
  });

  it('a section with more field lines than the cap', () => {
    const many = Array.from({ length: 300 }, (_, i) => [`x-${i}`, 'v'] as const);
    const bytes = encodeRequest({ method: 'GET', scheme: 'https', authority: '', path: '/', headers: many, content: new Uint8Array(0), trailers: [] });
    expect(() => decodeRequest(bytes)).toThrow(/more than 256 field lines/);
  });

  it('a field value with a line feed is never written', () => {
    expect(() => encodeResponse({ status: 200, headers: [['x', 'a\nb']], content: new Uint8Array(0) })).toThrow(/NUL, CR or LF/);
  });
});

describe('BinaryResponseReader: a stream read as it arrives', () => {
  const stream = Buffer.concat([
    indeterminateResponse.head(200, [['content-type', 'text/event-stream']]),
    indeterminateResponse.chunk(Buffer.from('data: 1\n\n')),
    indeterminateResponse.chunk(Buffer.from('data: 2\n\n')),
    indeterminateResponse.end([['x-trailer', 't']]),
  ]);

  it('gives the head once and each chunk as soon as its last byte arrives, one byte at a time', () => {
    const reader = new BinaryResponseReader();
    const seen: string[] = [];
    for (const byte of stream) {
      for (const event of reader.push(Buffer.of(byte))) seen.push('head' in event ? `head ${event.head.status}` : Buffer.from(event.content).toString());
    }
    reader.end();
    expect(seen).toEqual(['head 200', 'data: 1\n\n', 'data: 2\n\n']);
  });

  it('refuses a stream that ends inside its content', () => {
    const reader = new BinaryResponseReader();
    reader.push(stream.subarray(0, stream.length - indeterminateResponse.end([['x-trailer', 't']]).length - 3));
    expect(() => reader.end()).toThrow(/inside its content/);
  });

  it('refuses a head larger than its bound without holding more', () => {
    const reader = new BinaryResponseReader(100);
    const head = indeterminateResponse.head(200, [['x-big', 'v'.repeat(500)]]);
    expect(() => reader.push(head.subarray(0, 200))).toThrow(/larger than 100 bytes/);
  });
});
