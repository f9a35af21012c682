import type { ServerResponse } from 'node:http';
import { sseErrorEvent, type HttpError } from '../protocol/errors.ts';
import { cutStreamError } from './verification-error.ts';

const BOUNDARY = /\r?\n\r?\n/;
/** The events that tell an app a stream ended well (a Messages stream's `message_stop` too): held until the receipt after them verified. */
const FINAL = /^data: \[DONE\]\s*$|^event: response\.(completed|incomplete|failed)\s*$|^event: message_stop\s*$/m;
/** The receipt comment after `[DONE]` is for the verifier; the app gets the verdict (the status page, the audit directory). */
const RECEIPT_COMMENT = /^: receipt /;

/**
 * Relays an event stream from the attested client to the app event by event, as each arrives (docs/connect.md):
 * only the final event (`data: [DONE]`, or a response stream's `response.completed`) waits for the receipt that
 * follows it. A receipt that fails, or a stream cut before it, ends the app's stream with an error event instead.
 */
export async function relayEventStream(
  body: ReadableStream<Uint8Array>,
  res: ServerResponse,
  errorEvent: (error: HttpError) => string = sseErrorEvent,
): Promise<void> {
  const decoder = new TextDecoder();
  let pending = '';
  const held: string[] = [];
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
      pending += decoder.decode(chunk, { stream: true });
      let out = '';
      for (let match = BOUNDARY.exec(pending); match !== null; match = BOUNDARY.exec(pending)) {
        const end = match.index + match[0].length;
        const event = pending.slice(0, end);
        pending = pending.slice(end);
        if (RECEIPT_COMMENT.test(event)) continue;
        if (FINAL.test(event) || held.length > 0) held.push(event);
        else out += event;
      }
      if (out !== '') res.write(out);
    }
  } catch (err) {
    res.end(errorEvent(cutStreamError(err)));
    return;
  } finally {
    res.off('close', cancel);
  }
  res.end(held.join('') + pending);
}
