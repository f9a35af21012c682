import type { TokenUsage } from '../proxy/sse-relay.ts';

/** The one log line each request leaves: ids, route, outcome and counts; never content, never keys. */
export interface RequestLog {
  request_id: string;
  method: string;
  route: string;
  /** Only for a path no route matched (a 404), so the operator sees what was asked for. */
  path?: string;
  status?: number;
  model?: string;
  stream?: boolean;
  receipt?: boolean;
  usage?: TokenUsage;
  error_code?: string;
  /** Seconds from the request to the first stream chunk written (not logged: a metric). */
  ttft_s?: number;
}
