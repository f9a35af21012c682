/**
 * Bytes of an event stream to lines, as the WHATWG event-stream rules cut them: a line ends at CR, LF or CRLF (a CRLF
 * split across two chunks is one line end), and a blank line ends an event. One event, its lines counted with their
 * ends, is capped: a peer that never sends the blank line is refused at the cap instead of held in memory without end.
 * The server's relay, the verifier and `sigil connect` read streams through this one reader (no Buffer: browsers use it).
 *
 * Reading allocates nothing for a line inside one chunk: the current line is `bytes[start, end)`, its line end
 * `bytes[end, eolEnd)`. Only a line begun in an earlier chunk is joined into a new array (`joined`).
 */
/** The largest event a client reading a service's stream accepts (8× the service's default limits.max_sse_event_bytes). */
export const CLIENT_MAX_EVENT_BYTES = 8 * 1024 * 1024;

export class EventStreamLines {
  /** The array holding the current line: the chunk, or (when `joined`) a new array holding all of it from 0. */
  bytes: Uint8Array = EMPTY;
  start = 0;
  end = 0;
  /** The end of the current line's line end; equal to `end` for a last line the stream ended without one. */
  eolEnd = 0;
  /** The current line was begun in an earlier chunk: `bytes` holds it, and its line end, alone. */
  joined = false;
  /** A line took its event past the cap: nothing more is read. */
  overflow = false;

  private chunk: Uint8Array = EMPTY;
  private at = 0;
  private nextLf = -1;
  private nextCr = -1;
  private pending: Uint8Array[] = [];
  private pendingLength = 0;
  private eventBytes = 0;
  /** The last chunk ended in CR: an LF at the start of the next one finishes that CRLF, no new line. */
  private afterCr = false;

  /** @param maxEventBytes the most bytes one event may take, its lines and their ends (so a line too). */
  constructor(readonly maxEventBytes: number) {}

  /**
   * Starts reading `chunk`; returns where its first line starts: 1 when its LF finished a CRLF whose CR ended the
   * previous chunk (that byte belongs to the line already read), else 0.
   */
  push(chunk: Uint8Array): number {
    this.chunk = chunk;
    this.at = this.afterCr && this.pendingLength === 0 && chunk[0] === LF ? 1 : 0;
    this.afterCr = false;
    this.nextLf = chunk.indexOf(LF, this.at);
    this.nextCr = chunk.indexOf(CR, this.at);
    return this.at;
  }

  /**
   * Moves to the chunk's next complete line; false when none is left (the unfinished rest is kept for the next chunk)
   * or when the line took its event past the cap (`overflow`).
   */
  nextLine(): boolean {
    const { nextLf, nextCr, chunk } = this;
    if (this.overflow || (nextLf === -1 && nextCr === -1)) return this.holdRest();
    const lineEnd = nextCr === -1 ? nextLf : nextLf === -1 ? nextCr : Math.min(nextLf, nextCr);
    const crlf = chunk[lineEnd] === CR && chunk[lineEnd + 1] === LF;
    const eolEnd = lineEnd + (crlf ? 2 : 1);
    const from = this.at;
    if (this.pendingLength === 0 && lineEnd === from) {
      this.eventBytes = 0;
    } else {
      this.eventBytes += this.pendingLength + eolEnd - from;
      if (this.eventBytes > this.maxEventBytes) {
        this.overflow = true;
        return false;
      }
    }
    if (this.pendingLength === 0) {
      this.bytes = chunk;
      this.start = from;
      this.end = lineEnd;
      this.eolEnd = eolEnd;
      this.joined = false;
    } else {
      const line = concat(this.pending, this.pendingLength, chunk.subarray(from, eolEnd));
      this.pending = [];
      this.pendingLength = 0;
      this.bytes = line;
      this.start = 0;
      this.end = line.length - (eolEnd - lineEnd);
      this.eolEnd = line.length;
      this.joined = true;
    }
    if (chunk[lineEnd] === CR && !crlf && lineEnd === chunk.length - 1) this.afterCr = true;
    this.at = eolEnd;
    if (nextLf !== -1 && nextLf < eolEnd) this.nextLf = chunk.indexOf(LF, eolEnd);
    if (nextCr !== -1 && nextCr < eolEnd) this.nextCr = chunk.indexOf(CR, eolEnd);
    return true;
  }

  /** Where the kept rest of the current chunk starts (its length when every byte was a complete line). */
  get restStart(): number {
    return this.at;
  }

  /**
   * At the end of the stream, moves to a last line the stream ended without a line end (`eolEnd === end`); false when
   * there is none.
   */
  lastLine(): boolean {
    if (this.pendingLength === 0) return false;
    const line = concat(this.pending, this.pendingLength, EMPTY);
    this.pending = [];
    this.pendingLength = 0;
    this.bytes = line;
    this.start = 0;
    this.end = this.eolEnd = line.length;
    this.joined = true;
    return true;
  }

  /** The current line's text (UTF-8). */
  text(): string {
    return decoder.decode(this.bytes.subarray(this.start, this.end));
  }

  /** Keeps the chunk's unfinished rest for the next one; false, with `overflow` set when it takes its event past the cap. */
  private holdRest(): false {
    const { chunk, at } = this;
    if (this.overflow || at >= chunk.length) return false;
    this.pending.push(chunk.subarray(at));
    this.pendingLength += chunk.length - at;
    this.at = chunk.length;
    if (this.eventBytes + this.pendingLength > this.maxEventBytes) this.overflow = true;
    return false;
  }
}

const LF = 0x0a;
const CR = 0x0d;
const EMPTY = new Uint8Array(0);
const decoder = new TextDecoder();

function concat(pieces: readonly Uint8Array[], length: number, last: Uint8Array): Uint8Array {
  const out = new Uint8Array(length + last.length);
  let at = 0;
  for (const piece of pieces) {
    out.set(piece, at);
    at += piece.length;
  }
  out.set(last, at);
  return out;
}
