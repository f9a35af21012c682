/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/#traceparent-header): version 00's
 * `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, ids not all zero. Anything else is dropped,
 * never passed on: the engine gets only a well-formed header.
 */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;
/** tracestate: list members of key=value, at most 512 characters (the spec's limit for propagation). */
const TRACESTATE = /^[\x20-\x2b\x2d-\x7e]*(?:,[\x20-\x2b\x2d-\x7e]*)*$/;

export function validTraceparent(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' && TRACEPARENT.test(value) ? value : undefined;
}

export function validTracestate(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' && value.length <= 512 && TRACESTATE.test(value) ? value : undefined;
}
