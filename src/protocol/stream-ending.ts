/**
 * Where an event stream of each relayed endpoint ends (docs/receipts.md, "Streams"): the server closes it
 * there and appends the message receipt, the verifier cuts the hashed bytes there, `sigil connect` holds
 * that event until the receipt after it verified. One rule for all three; a new kind of stream is one more
 * entry in STREAM_ENDING_RULES, not another reader.
 *
 * - `done`: chat and text completions end with a `data: [DONE]` event;
 * - `event`: `/v1/responses` streams have no [DONE]; they end with the `response.completed` event, and Anthropic's
 *   `/v1/messages` streams with the `message_stop` event.
 */
export type StreamEnding = 'done' | 'event';

/** How one kind of stream says it is finished. */
export interface StreamEndingRule {
  /** The data of the event that ends the stream (`[DONE]`), for streams that end with a sentinel. */
  readonly endData?: string;
  /**
   * The type of the event that ends the stream (its `event:` field or its data's `type`), for streams that end with their last event:
   * the Responses API's; another endpoint's is in COMPLETING_EVENTS (`message_stop` for Messages).
   */
  readonly endEventType?: string;
  /** Other event types an app reads as the end of the stream (a failed response), though no receipt follows them. */
  readonly alsoFinalEventTypes: readonly string[];
}

export const STREAM_ENDING_RULES: Readonly<Record<StreamEnding, StreamEndingRule>> = {
  done: { endData: '[DONE]', alsoFinalEventTypes: [] },
  event: { endEventType: 'response.completed', alsoFinalEventTypes: ['response.incomplete', 'response.failed'] },
};

/** The paths whose streams end with their last event rather than `data: [DONE]`, and that event's `type`. */
const COMPLETING_EVENTS: ReadonlyMap<string, string> = new Map([
  ['/v1/responses', STREAM_ENDING_RULES.event.endEventType!],
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

const FINAL_DATA = new Set(Object.values(STREAM_ENDING_RULES).flatMap((rule) => (rule.endData === undefined ? [] : [rule.endData])));
const FINAL_EVENT_TYPES = new Set([...Object.values(STREAM_ENDING_RULES).flatMap((rule) => rule.alsoFinalEventTypes), ...COMPLETING_EVENTS.values()]);

/**
 * Whether an event's line (`data: [DONE]`, `event: response.completed`, ...) tells an app, whatever the kind of stream,
 * that the stream is over: what a relay that does not know the endpoint holds until the receipt after it verified.
 */
export function isFinalEventLine(line: string): boolean {
  const field = /^(data|event): ?(.*?)\s*$/.exec(line);
  if (field === null) return false;
  return field[1] === 'data' ? FINAL_DATA.has(field[2]!) : FINAL_EVENT_TYPES.has(field[2]!);
}

const latin1 = new TextDecoder('latin1');
/** A line end, then the blank line: the end of an event. */
const EVENT_END = /(?:\r\n|\r|\n)(?:\r\n|\r|\n)$/;
/** Per sentinel, the sentinel's `data:` line as a whole line (at the start of the body or after a line end), then its blank line. */
const SENTINEL_EVENTS = new Map(
  Object.values(STREAM_ENDING_RULES).flatMap((rule) =>
    rule.endData === undefined
      ? []
      : [[rule.endData, new RegExp(`(?:^|\\r\\n|\\r|\\n)data: ?${rule.endData.replace(/[[\]]/g, '\\$&')}(?:\\r\\n|\\r|\\n)(?:\\r\\n|\\r|\\n)$`)] as const],
  ),
);

/**
 * Whether a body ends where a stream of kind `ending` ends: with the sentinel event (`data: [DONE]` and its blank line)
 * for a sentinel-ended stream, at the end of an event for one that ends with its last event. What the verifier cuts by.
 */
export function endsWhereStreamEnds(bytes: Uint8Array, ending: StreamEnding): boolean {
  const { endData } = STREAM_ENDING_RULES[ending];
  if (endData === undefined) return EVENT_END.test(latin1.decode(bytes.subarray(Math.max(0, bytes.length - 4))));
  return SENTINEL_EVENTS.get(endData)!.test(tailOf(bytes, endData.length + 32));
}

/** The last `length` bytes of a body, the partial line they start with replaced by one NUL (a line that does not start there), or all of a short body. */
function tailOf(bytes: Uint8Array, length: number): string {
  if (bytes.length <= length) return latin1.decode(bytes);
  return latin1.decode(bytes.subarray(bytes.length - length)).replace(/^[^\r\n]*/, (head) => (head.length === 0 ? '' : '\u0000'));
}
