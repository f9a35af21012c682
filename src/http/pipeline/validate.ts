import { randomUUID } from 'node:crypto';
import { selectUpstreams } from '../../proxy/select-upstream.ts';
import { parseJsonBody, upstreamBody, validateRequest } from '../chat-request.ts';
import type { AdmittedExchange, ValidExchange } from './exchange.ts';

/**
 * Validate: the body is one JSON object whose model is in the catalogue and serves this endpoint, with
 * the fields Sigil owns well formed (docs/api.md#chat-completions); then the engines to try, the receipt
 * id, and the bytes the engine gets.
 */
export function validate(x: AdmittedExchange): ValidExchange {
  const { ctx, log } = x;
  const chat = validateRequest(parseJsonBody(x.raw), ctx.catalogue, x.endpoint);
  const { model } = chat;
  log.model = model.id;
  log.stream = chat.stream;
  log.receipt = x.receipt.wanted;
  log.key_id = x.caller.keyId;
  return Object.assign(x, {
    chat,
    candidates: selectUpstreams(model, ctx.upstreams, chat.region, ctx.config.routing.strict_regions),
    receiptId: x.receipt.wanted ? randomUUID() : '',
    selected: { provider: model.provider, model_id: model.id, model_hash: model.model_hash },
    rewriteModel: model.upstream_model === model.id ? undefined : model.id,
    forwarded: upstreamBody(x.raw, chat),
  });
}
