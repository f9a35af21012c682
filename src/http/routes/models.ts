import type { IncomingMessage, ServerResponse } from 'node:http';
import { listModels, modelItem, type ListFilter } from '../../catalogue/list.ts';
import type { AppContext } from '../context.ts';
import type { RequestTarget } from '../request-target.ts';
import { httpError } from '../../protocol/errors.ts';
import { sendJson } from '../respond.ts';

/** `detail=true|false` (absent: false), checked the same way on the list and on one model. */
function readDetail(query: URLSearchParams): boolean {
  const detail = query.get('detail');
  if (detail !== null && detail !== 'true' && detail !== 'false') {
    throw httpError('invalid_value', "'detail' must be true or false.", 'detail');
  }
  return detail === 'true';
}

/** Reads `detail`, `region` and `provider` from the query; other parameters are ignored. */
function parseListFilter(query: URLSearchParams): ListFilter {
  const filter: ListFilter = { detail: readDetail(query) };
  const region = query.get('region');
  const provider = query.get('provider');
  if (region !== null) filter.region = region;
  if (provider !== null) filter.provider = provider;
  return filter;
}

/** GET /v1/models */
export function handleListModels(_req: IncomingMessage, res: ServerResponse, ctx: AppContext, url: RequestTarget): void {
  sendJson(res, 200, JSON.stringify(listModels(ctx.catalogue, parseListFilter(url.searchParams))));
}

/** GET /v1/models/{id}: ids may contain slashes (`org/model`), sent raw or percent-encoded. */
export function handleRetrieveModel(_req: IncomingMessage, res: ServerResponse, ctx: AppContext, url: RequestTarget): void {
  let id: string;
  try {
    id = decodeURIComponent(url.pathname.slice('/v1/models/'.length));
  } catch {
    throw httpError('invalid_value', 'The model id in the path is not valid percent-encoding.', 'model');
  }
  const model = ctx.catalogue.byId.get(id);
  if (model === undefined) throw httpError('model_not_found', `The model '${id}' does not exist or you do not have access to it.`, 'model');
  sendJson(res, 200, JSON.stringify(modelItem(model, readDetail(url.searchParams))));
}
