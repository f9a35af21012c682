import type { ServerResponse } from 'node:http';
import { HttpError, sseErrorEvent } from '../protocol/errors.ts';
import { CLIENT_MAX_EVENT_BYTES, EventStreamLines } from '../protocol/event-stream-lines.ts';
import { isReceiptCommentLine } from '../protocol/receipt-comment.ts';
import { isFinalEventLine } from '../protocol/stream-ending.ts';
import { cutStreamError } from './verification-error.ts';

/** The largest event relayed: a longer one ends the app's stream. */
export const MAX_RELAYED_EVENT_BYTES = CLIENT_MAX_EVENT_BYTES;
/** Longer lines cannot be `data: [DONE]` or an `event:` that ends a stream: not decoded to look. */
const FINAL_LINE_MAX = 64;

/**
 * Relays an event stream from the attested client to the app event by event, as each arrives (docs/connect.md):
 * only the final event (`data: [DONE]`, or a response stream's `response.completed`) waits for the receipt that
 * follows it. A receipt that fails, or a stream cut before it, ends the app's stream with an error event instead.
 * Events are cut by the one event-stream reader (CR, LF or CRLF line ends); one larger than `maxEventBytes` ends the
 * stream with an error event.
 */
export async function relayEventStream(
  body: ReadableStream<Uint8Array>,
  res: ServerResponse,
  { maxEventBytes = MAX_RELAYED_EVENT_BYTES, errorEvent = sseErrorEvent }: { maxEventBytes?: number; errorEvent?: (error: HttpError) => string } = {},
): Promise<void> {
  const lines = new EventStreamLines(maxEventBytes);
  /** The lines of the event being read, with their line ends. */
  let event: Uint8Array[] = [];
  let isReceipt = false;
  let isFinal = false;
  const held: Uint8Array[] = [];
  let lastLineWent: 'event' | 'out' | 'held' | 'dropped' = 'event';
  const reader = body.getReader();
  // An app that goes away stops the stream from the service too: nothing reads it any more.
  const cancel = () => {
    if (!res.writableFinished) reader.cancel().catch(() => undefined);
  };
  res.once('close', cancel);
  try {
    for (;;) {
      const { done, value: chunk } = await reader.read();
      if (done) break;
      const out: Uint8Array[] = [];
      // An LF finishing a CRLF split across chunks goes where the line it ends went.
      if (lines.push(chunk) === 1)
        (lastLineWent === 'event' ? event : lastLineWent === 'out' ? out : lastLineWent === 'held' ? held : []).push(chunk.subarray(0, 1));
      while (lines.nextLine()) {
        const { bytes, start, end, eolEnd } = lines;
        if (event.length === 0 && isReceiptCommentLine(bytes, start, end)) isReceipt = true;
        if (end - start <= FINAL_LINE_MAX && isFinalEventLine(lines.text())) isFinal = true;
        event.push(bytes.subarray(start, eolEnd));
        lastLineWent = 'event';
        if (end !== start) continue;
        // The receipt comment after `[DONE]` is for the verifier; the app gets the verdict (the status page, the audit directory).
        lastLineWent = isReceipt ? 'dropped' : isFinal || held.length > 0 ? 'held' : 'out';
        if (lastLineWent === 'held') held.push(...event);
        else if (lastLineWent === 'out') out.push(...event);
        event = [];
        isReceipt = isFinal = false;
      }
      if (lines.overflow)
        throw new HttpError('upstream_bad_response', `The service sent a stream event larger than ${maxEventBytes} bytes; sigil connect ended the stream.`);
      if (out.length > 0) res.write(Buffer.concat(out));
    }
  } catch (err) {
    if (lines.overflow) reader.cancel().catch(() => undefined);
    res.end(errorEvent(lines.overflow ? (err as HttpError) : cutStreamError(err)));
    return;
  } finally {
    res.off('close', cancel);
  }
  if (lines.lastLine()) event.push(lines.bytes);
  res.end(Buffer.concat([...held, ...event]));
}
