/**
 * Where an event stream of each relayed endpoint ends (docs/receipts.md, "Streams"): the server closes it
 * there and appends the message receipt, the verifier cuts the hashed bytes there. One rule for both.
 *
 * - `done`: chat and text completions end with a `data: [DONE]` event;
 * - `event`: `/v1/responses` streams have no [DONE]; they end with the `response.completed` event, and Anthropic's
 *   `/v1/messages` streams with the `message_stop` event.
 */
export type StreamEnding = 'done' | 'event';

/** The paths whose streams end with their last event rather than `data: [DONE]`, and that event's `type`. */
const COMPLETING_EVENTS: ReadonlyMap<string, string> = new Map([
  ['/v1/responses', 'response.completed'],
  ['/v1/messages', 'message_stop'],
]);

function completingEntry(path: string): [string, string] | undefined {
  const bare = path.split('?')[0]!.replace(/\/+$/, '');
  for (const entry of COMPLETING_EVENTS) if (bare === entry[0] || bare.endsWith(entry[0])) return entry;
  return undefined;
}

/** The stream ending of the endpoint at `path` (a request path such as `/v1/chat/completions`, query ignored). */
export function streamEndingOf(path: string): StreamEnding {
  return completingEntry(path) === undefined ? 'done' : 'event';
}

/** The `type` of the event that ends a stream of the endpoint at `path`, for the endpoints that end with an event (`response.completed`, `message_stop`). */
export function completingEventOf(path: string): string | undefined {
  return completingEntry(path)?.[1];
}
