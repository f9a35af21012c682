import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppContext } from '../context.ts';
import type { RequestTarget } from '../request-target.ts';
import { httpError } from '../../protocol/errors.ts';
import { parseTilePath } from '../../verify/tlog/tile-path.ts';
import type { TransparencyLog } from '../../tlog/transparency-log.ts';
import { sendJson } from '../respond.ts';

/**
 * The transparency log under /v1/log/ (docs/log.md): `checkpoint` and `tile/...` as C2SP tlog-tiles (static,
 * mirrorable), and two dynamic helpers over the same tree: `proof?index=N|receipt_id=ID[&size=S]` (inclusion)
 * and `consistency?from=A[&to=B]`.
 */
export function handleLog(req: IncomingMessage, res: ServerResponse, ctx: AppContext, url: RequestTarget): void {
  const log = ctx.transparencyLog;
  if (log === undefined) throw httpError('not_found', 'This service keeps no transparency log (transparency_log is not configured).');
  const path = url.pathname.slice('/v1/log/'.length);
  const head = req.method === 'HEAD';
  if (path === 'checkpoint') {
    const body = Buffer.from(log.checkpoint.note);
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': body.length, 'cache-control': 'no-cache, max-age=1' });
    res.end(head ? undefined : body);
    return;
  }
  if (path === 'proof') return sendJson(res, 200, JSON.stringify(inclusion(log, url.searchParams)));
  if (path === 'consistency') return sendJson(res, 200, JSON.stringify(consistency(log, url.searchParams)));
  if (path.startsWith('tile/')) {
    let tile;
    try {
      tile = parseTilePath(path);
    } catch {
      throw httpError('not_found', 'Not a tile path (C2SP tlog-tiles: tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>]).');
    }
    const bytes = log.tile(tile);
    if (bytes === undefined) throw httpError('not_found', 'The published tree has no such tile yet.');
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bytes.length, 'cache-control': 'public, max-age=31536000, immutable' });
    res.end(head ? undefined : bytes);
    return;
  }
  throw httpError('not_found', 'The log serves checkpoint, tile/..., proof and consistency.');
}

function count(params: URLSearchParams, name: string, fallback?: number): number {
  const text = params.get(name);
  if (text === null) {
    if (fallback !== undefined) return fallback;
    throw httpError('missing_required_parameter', `Give ${name}.`, name);
  }
  if (!/^(?:0|[1-9]\d{0,15})$/.test(text)) throw httpError('invalid_value', `${name} must be a non-negative integer.`, name);
  return Number(text);
}

const b64 = (h: Buffer) => h.toString('base64');

function inclusion(log: TransparencyLog, params: URLSearchParams) {
  const published = log.checkpoint;
  const size = count(params, 'size', published.size);
  const receiptId = params.get('receipt_id');
  let indexes: readonly number[];
  if (receiptId !== null) {
    const known = receiptId.length <= 128 ? log.indexesOf(receiptId) : undefined;
    if (known === undefined)
      throw httpError('log_entry_not_found', 'The log does not remember that receipt id; ask by leaf index (the receipt response named it).', 'receipt_id');
    indexes = known;
  } else indexes = [count(params, 'index')];
  const proofs = indexes.map((index) => {
    const proof = log.inclusion(index, size);
    if (proof === undefined) {
      throw httpError(
        'log_entry_not_found',
        `Leaf ${index} is not in the published tree of ${size} entries yet (it is integrated within the maximum merge delay).`,
        'index',
      );
    }
    return { index, entry: b64(proof.entry), proof: proof.proof.map(b64) };
  });
  return { tree_size: size, checkpoint: size === published.size ? published.note : null, proofs };
}

function consistency(log: TransparencyLog, params: URLSearchParams) {
  const to = count(params, 'to', log.checkpoint.size);
  const from = count(params, 'from');
  const proof = log.consistency(from, to);
  if (proof === undefined)
    throw httpError('invalid_value', `The published tree has ${log.checkpoint.size} entries: give 0 <= from <= to <= ${log.checkpoint.size}.`, 'from');
  return { from, to, proof: proof.map(b64) };
}
