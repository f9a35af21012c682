/**
 * Where an event stream of each relayed endpoint ends (docs/receipts.md, "Streams"): the server closes it
 * there and appends the message receipt, the verifier cuts the hashed bytes there. One rule for both.
 *
 * - `done`: chat and text completions end with a `data: [DONE]` event;
 * - `event`: `/v1/responses` streams have no [DONE]; they end with the `response.completed` event.
 */
export type StreamEnding = 'done' | 'event';

/** The paths whose streams end with their last event rather than `data: [DONE]`. */
const EVENT_ENDED_PATHS: readonly string[] = ['/v1/responses'];

/** The stream ending of the endpoint at `path` (a request path such as `/v1/chat/completions`, query ignored). */
export function streamEndingOf(path: string): StreamEnding {
  const bare = path.split('?')[0]!.replace(/\/+$/, '');
  return EVENT_ENDED_PATHS.some((p) => bare === p || bare.endsWith(p)) ? 'event' : 'done';
}
