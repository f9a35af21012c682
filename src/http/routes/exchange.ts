import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppContext } from '../context.ts';
import type { EndpointDescription } from '../endpoints.ts';
import type { AccessLogLine } from '../access-log.ts';
import { admit } from '../pipeline/admit.ts';
import { authenticate } from '../pipeline/authenticate.ts';
import { begin, type ExchangeShared } from '../pipeline/begin.ts';
import { forward } from '../pipeline/forward.ts';
import { read } from '../pipeline/read.ts';
import { relayJson } from '../pipeline/relay-json.ts';
import { relayStream, streams } from '../pipeline/relay-stream.ts';
import { modelReceipt, modelReceiptFirst } from '../pipeline/sign.ts';
import { validate } from '../pipeline/validate.ts';

export type { ExchangeShared } from '../pipeline/begin.ts';

/**
 * POST on a relayed endpoint (chat completions, completions, embeddings, responses): one pipeline of
 * named steps, each in src/http/pipeline (docs/architecture.md#the-exchange-pipeline); the endpoint's
 * description says what differs.
 */
export function createExchangeHandler(endpoint: EndpointDescription, shared: ExchangeShared) {
  return (req: IncomingMessage, res: ServerResponse, ctx: AppContext, log: AccessLogLine) => exchange(endpoint, shared, req, res, ctx, log);
}

async function exchange(endpoint: EndpointDescription, shared: ExchangeShared, req: IncomingMessage, res: ServerResponse, ctx: AppContext, log: AccessLogLine) {
  const started = performance.now();
  const caller = authenticate(req, ctx);
  const begun = begin(endpoint, shared, req, res, ctx, log, caller, started);
  const withBody = await read(begun);
  const admitted = await admit(withBody);
  if (admitted === undefined) return;
  const valid = validate(admitted);
  if (modelReceiptFirst(valid)) modelReceipt(valid);
  const forwarded = await forward(valid);
  if (streams(forwarded)) await relayStream(forwarded);
  else await relayJson(forwarded);
}
