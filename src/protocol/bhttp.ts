/**
 * Binary HTTP messages (RFC 9292), what Oblivious HTTP encrypts: one reader and one writer for the gateway in the
 * enclave and for clients. Parsing is strict (§4: an invalid message is never processed): field names as HTTP/2
 * allows them (lower case), no pseudo-fields, values without NUL, CR or LF, non-zero padding refused, and a cap on
 * the number of field lines, so a message cannot make its reader hold more than the bytes it arrived in.
 */
import { encodeVarint, readVarint, varintLength, writeVarint } from './quic-varint.ts';
import { SigilError } from './sigil-error.ts';

export type FieldLine = readonly [name: string, value: string];

export interface BinaryRequest {
  method: string;
  scheme: string;
  /** Empty where the request names no authority. */
  authority: string;
  path: string;
  headers: FieldLine[];
  content: Uint8Array;
  trailers: FieldLine[];
}

export interface BinaryResponse {
  status: number;
  headers: FieldLine[];
  content: Uint8Array;
  trailers: FieldLine[];
  /** Interim (1xx) responses before the final one, in order. */
  informational: Array<{ status: number; headers: FieldLine[] }>;
}

/** Why a binary message was refused: it says what is wrong, never a byte of the message. */
export class BinaryHttpError extends SigilError<'ERR_BHTTP_INVALID'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_BHTTP_INVALID', message, options);
  }
}

const KNOWN_REQUEST = 0;
const KNOWN_RESPONSE = 1;
const INDETERMINATE_REQUEST = 2;
const INDETERMINATE_RESPONSE = 3;

/** More field lines than any API request carries: a section past it is refused before it is held. */
export const MAX_FIELD_LINES = 256;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
const BAD_VALUE = /[\0\r\n]|^[ \t]|[ \t]$/;
const text = new TextEncoder();
const latin1 = new TextDecoder('latin1');
const utf8 = new TextDecoder('utf-8', { fatal: true });

// ---------------------------------------------------------------------------------------------------- writing

function sized(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

function prefixed(bytes: Uint8Array): Uint8Array[] {
  return [encodeVarint(bytes.length), bytes];
}

function fieldLines(fields: readonly FieldLine[]): Uint8Array[] {
  const parts: Uint8Array[] = [];
  for (const [name, value] of fields) {
    checkField(name, value);
    parts.push(...prefixed(text.encode(name)), ...prefixed(text.encode(value)));
  }
  return parts;
}

function knownSection(fields: readonly FieldLine[]): Uint8Array[] {
  const lines = sized(fieldLines(fields));
  return prefixed(lines);
}

function controlData(request: BinaryRequest): Uint8Array[] {
  return [request.method, request.scheme, request.authority, request.path].flatMap((part) => prefixed(text.encode(part)));
}

/** A request of known length (framing indicator 0), the form a client sends whole. */
export function encodeRequest(request: BinaryRequest): Uint8Array {
  return sized([
    encodeVarint(KNOWN_REQUEST),
    ...controlData(request),
    ...knownSection(request.headers),
    ...prefixed(request.content),
    ...knownSection(request.trailers),
  ]);
}

/** A response of known length (framing indicator 1). */
export function encodeResponse(response: Pick<BinaryResponse, 'status' | 'headers' | 'content'> & { trailers?: FieldLine[] }): Uint8Array {
  return sized([
    encodeVarint(KNOWN_RESPONSE),
    encodeVarint(response.status),
    ...knownSection(response.headers),
    ...prefixed(response.content),
    ...knownSection(response.trailers ?? []),
  ]);
}

/**
 * A response of indeterminate length (framing indicator 3) written as it happens: the head, then each piece of
 * content as one chunk, then the end with the trailers. A stream is relayed this way, one event at a time.
 */
export const indeterminateResponse = {
  head(status: number, headers: readonly FieldLine[]): Uint8Array {
    return sized([encodeVarint(INDETERMINATE_RESPONSE), encodeVarint(status), ...fieldLines(headers), encodeVarint(0)]);
  },
  chunk(content: Uint8Array): Uint8Array {
    if (content.length === 0) throw new RangeError('an indeterminate-length content chunk is never empty');
    const out = new Uint8Array(varintLength(content.length) + content.length);
    out.set(content, writeVarint(out, 0, content.length));
    return out;
  },
  end(trailers: readonly FieldLine[] = []): Uint8Array {
    return sized([encodeVarint(0), ...fieldLines(trailers), encodeVarint(0)]);
  },
};

function checkField(name: string, value: string): void {
  if (!TOKEN.test(name)) throw new BinaryHttpError(`a field name that HTTP/2 refuses (it must be a lower-case token): ${JSON.stringify(name.slice(0, 40))}`);
  if (BAD_VALUE.test(value)) throw new BinaryHttpError(`the value of field ${name} holds NUL, CR or LF, or starts or ends with white space`);
}

// ---------------------------------------------------------------------------------------------------- reading

class Cursor {
  offset = 0;
  constructor(readonly bytes: Uint8Array) {}

  get atEnd(): boolean {
    return this.offset >= this.bytes.length;
  }

  varint(what: string): number {
    const read = readVarint(this.bytes, this.offset);
    if (read === undefined) throw new BinaryHttpError(`the message ends inside ${what}`);
    this.offset = read.next;
    return read.value;
  }

  take(length: number, what: string): Uint8Array {
    if (this.offset + length > this.bytes.length) throw new BinaryHttpError(`the message ends inside ${what}`);
    const out = new Uint8Array(this.bytes.buffer, this.bytes.byteOffset + this.offset, length);
    this.offset += length;
    return out;
  }

  string(what: string): string {
    return latin1.decode(this.take(this.varint(`the length of ${what}`), what));
  }
}

function readField(cursor: Cursor, fields: FieldLine[], where: string): void {
  if (fields.length >= MAX_FIELD_LINES) throw new BinaryHttpError(`the ${where} has more than ${MAX_FIELD_LINES} field lines`);
  const name = cursor.string(`a field name of the ${where}`);
  if (name.length === 0) throw new BinaryHttpError(`an empty field name in the ${where}`);
  const value = cursor.take(cursor.varint(`a field value of the ${where}`), `a field value of the ${where}`);
  let decoded: string;
  try {
    decoded = utf8.decode(value);
  } catch {
    throw new BinaryHttpError(`the value of field ${JSON.stringify(name.slice(0, 40))} in the ${where} is not UTF-8`);
  }
  checkField(name, decoded);
  fields.push([name, decoded]);
}

/**
 * A field section. A whole message may end (be truncated) where a section would start, which means an empty one; a
 * message still arriving (`whole` false) may not, as more bytes may be on their way.
 */
function readSection(cursor: Cursor, indeterminate: boolean, where: string, whole = true): FieldLine[] {
  const fields: FieldLine[] = [];
  if (whole && cursor.atEnd) return fields;
  if (indeterminate) {
    for (;;) {
      const read = readVarint(cursor.bytes, cursor.offset);
      if (read === undefined) throw new BinaryHttpError(`the ${where} does not end`);
      if (read.value === 0) {
        cursor.offset = read.next;
        return fields;
      }
      readField(cursor, fields, where);
    }
  }
  const section = new Cursor(cursor.take(cursor.varint(`the length of the ${where}`), `the ${where}`));
  while (!section.atEnd) readField(section, fields, where);
  return fields;
}

function readContent(cursor: Cursor, indeterminate: boolean): Uint8Array {
  if (cursor.atEnd) return new Uint8Array(0);
  if (!indeterminate) return cursor.take(cursor.varint('the content length'), 'the content');
  const chunks: Uint8Array[] = [];
  for (;;) {
    const length = cursor.varint('a content chunk length');
    if (length === 0) return sized(chunks);
    chunks.push(cursor.take(length, 'a content chunk'));
  }
}

function refuseNonZeroPadding(cursor: Cursor): void {
  for (let i = cursor.offset; i < cursor.bytes.length; i++) {
    if (cursor.bytes[i] !== 0) throw new BinaryHttpError('bytes after the end of the message that are not zero padding');
  }
}

export function decodeRequest(bytes: Uint8Array): BinaryRequest {
  const cursor = new Cursor(bytes);
  const framing = cursor.varint('the framing indicator');
  if (framing !== KNOWN_REQUEST && framing !== INDETERMINATE_REQUEST) throw new BinaryHttpError(`framing indicator ${framing} is not a request's (0 or 2)`);
  const indeterminate = framing === INDETERMINATE_REQUEST;
  const method = cursor.string('the method');
  const scheme = cursor.string('the scheme');
  const authority = cursor.string('the authority');
  const path = cursor.string('the path');
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(method)) throw new BinaryHttpError('the method is not a token');
  if (!path.startsWith('/') && path !== '*') throw new BinaryHttpError('the path does not start with a slash');
  const headers = readSection(cursor, indeterminate, 'header section');
  const content = readContent(cursor, indeterminate);
  const trailers = readSection(cursor, indeterminate, 'trailer section');
  refuseNonZeroPadding(cursor);
  return { method, scheme, authority, path, headers, content, trailers };
}

export function decodeResponse(bytes: Uint8Array): BinaryResponse {
  const cursor = new Cursor(bytes);
  const framing = cursor.varint('the framing indicator');
  if (framing !== KNOWN_RESPONSE && framing !== INDETERMINATE_RESPONSE) throw new BinaryHttpError(`framing indicator ${framing} is not a response's (1 or 3)`);
  const indeterminate = framing === INDETERMINATE_RESPONSE;
  const informational: BinaryResponse['informational'] = [];
  for (;;) {
    const status = cursor.varint('the status code');
    if (status < 100 || status > 599) throw new BinaryHttpError(`status code ${status} is out of range`);
    const headers = readSection(cursor, indeterminate, 'header section');
    if (status >= 200) {
      const content = readContent(cursor, indeterminate);
      const trailers = readSection(cursor, indeterminate, 'trailer section');
      refuseNonZeroPadding(cursor);
      return { status, headers, content, trailers, informational };
    }
    informational.push({ status, headers });
  }
}

/**
 * Reads a response of indeterminate length as its bytes arrive (the client's side of a stream): `push` returns what
 * became whole, the head once, then each content chunk as it completes; `end` checks the message ended where it may.
 * The head is bounded (`maxHeadBytes`); content passes through without being held. (A known-length response arrives
 * whole: `decodeResponse` reads it.)
 */
export class BinaryResponseReader {
  #buffer: Uint8Array = new Uint8Array(0);
  #state: 'head' | 'content' | 'trailers' | 'done' = 'head';

  constructor(private readonly maxHeadBytes = 64 * 1024) {}

  push(bytes: Uint8Array): Array<{ head: { status: number; headers: FieldLine[] } } | { content: Uint8Array }> {
    this.#buffer = this.#buffer.length === 0 ? bytes : sized([this.#buffer, bytes]);
    const out: Array<{ head: { status: number; headers: FieldLine[] } } | { content: Uint8Array }> = [];
    for (;;) {
      if (this.#state === 'head') {
        const head = this.#readHead();
        if (head === undefined) {
          if (this.#buffer.length > this.maxHeadBytes) throw new BinaryHttpError(`the response head is larger than ${this.maxHeadBytes} bytes`);
          return out;
        }
        out.push({ head });
        continue;
      }
      if (this.#state !== 'content') return out;
      const read = readVarint(this.#buffer, 0);
      if (read === undefined) return out;
      if (read.value === 0) {
        this.#buffer = this.#buffer.subarray(read.next);
        this.#state = 'trailers';
        return out;
      }
      if (read.next + read.value > this.#buffer.length) return out;
      out.push({ content: this.#buffer.subarray(read.next, read.next + read.value) });
      this.#buffer = this.#buffer.subarray(read.next + read.value);
    }
  }

  /** The response's bytes are all in: only trailers and zero padding may remain. */
  end(): void {
    if (this.#state === 'head') throw new BinaryHttpError('the response ended before its head did');
    if (this.#state === 'content') throw new BinaryHttpError('the response ended inside its content');
    const cursor = new Cursor(this.#buffer);
    readSection(cursor, true, 'trailer section');
    refuseNonZeroPadding(cursor);
    this.#state = 'done';
  }

  #readHead(): { status: number; headers: FieldLine[] } | undefined {
    const cursor = new Cursor(this.#buffer);
    try {
      const framing = cursor.varint('the framing indicator');
      if (framing !== INDETERMINATE_RESPONSE) throw new BinaryHttpError(`framing indicator ${framing} is not a streamed response's (3)`);
      for (;;) {
        const status = cursor.varint('the status code');
        if (status < 100 || status > 599) throw new BinaryHttpError(`status code ${status} is out of range`);
        const headers = readSection(cursor, true, 'header section', false);
        if (status < 200) continue;
        this.#buffer = this.#buffer.subarray(cursor.offset);
        this.#state = 'content';
        return { status, headers };
      }
    } catch (error) {
      if (error instanceof BinaryHttpError && /ends inside|does not end/.test(error.message)) return undefined;
      throw error;
    }
  }
}
