import type { IncomingMessage, ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import type { AppContext } from '../context.ts';
import type { RequestTarget } from '../request-target.ts';
import { httpError } from '../../protocol/errors.ts';
import { parseTilePath } from '../../protocol/tlog/tile-path.ts';
import type { TransparencyLog } from '../../tlog/transparency-log.ts';
import { StoredTileError } from '../../tlog/stored-tiles.ts';
import type { LogDocument, ServedLog } from '../../tlog/served-log.ts';

/**
 * The transparency log under /v1/log/ (docs/log.md): `checkpoint` and `tile/...` as C2SP tlog-tiles (static,
 * mirrorable), and two dynamic helpers over the same tree: `proof?index=N|receipt_id=ID[&size=S]` (inclusion)
 * and `consistency?from=A[&to=B]`. With workers, the resource is read from the primary's log (src/workers).
 */
export async function handleLog(req: IncomingMessage, res: ServerResponse, ctx: AppContext, url: RequestTarget): Promise<void> {
  const log = ctx.transparencyLog;
  if (log === undefined) throw httpError('not_found', 'This service keeps no transparency log (transparency_log is not configured).');
  const resource = url.pathname.slice('/v1/log/'.length);
  const document = await log.read(resource, url.searchParams.toString());
  // tlog-tiles: entry bundles SHOULD be compressed for a client that accepts it; the folder keeps them as they are, so a static mirror serves them too.
  const bundle = resource.startsWith('tile/entries/');
  const gzipped = bundle && acceptsGzip(req.headers['accept-encoding']);
  const body = gzipped ? gzipSync(document.body) : document.body;
  res.writeHead(200, {
    'content-type': document.contentType,
    'content-length': body.length,
    ...(document.cacheControl === undefined ? {} : { 'cache-control': document.cacheControl }),
    ...(bundle ? { vary: 'Accept-Encoding' } : {}),
    ...(gzipped ? { 'content-encoding': 'gzip' } : {}),
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}

/** Whether an Accept-Encoding header accepts gzip (named, or `*`, with a q-value above 0). */
function acceptsGzip(header: string | undefined): boolean {
  return (header ?? '').split(',').some((part) => {
    const [coding, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return (coding === 'gzip' || coding === '*') && (q === undefined || Number(q.slice(2)) > 0);
  });
}

/** The log of this process, served as it is: the sequencer's own (one serving process, or the primary answering its workers). */
export function servedLocally(log: TransparencyLog): ServedLog {
  return {
    // The index leaves only once its entry is on disk: a receipt a client holds is one the log keeps across a crash.
    append: async (jws, receiptId) => {
      const index = log.append(jws, receiptId);
      await log.whenDurable(index);
      return index;
    },
    read: (resource, query) => logDocument(log, resource, query),
  };
}

const json = (value: unknown): LogDocument => ({ contentType: 'application/json', body: Buffer.from(JSON.stringify(value)) });

/** A resource of the log: its bytes, or an HttpError. */
export function logDocument(log: TransparencyLog, resource: string, query: string): LogDocument {
  try {
    return readLog(log, resource, query);
  } catch (err) {
    // The log folder lost or altered a tile written earlier: it is never served or used in a proof.
    if (err instanceof StoredTileError) throw httpError('log_tile_invalid', `The log's ${err.message}; it is not served.`);
    throw err;
  }
}

function readLog(log: TransparencyLog, resource: string, query: string): LogDocument {
  const params = new URLSearchParams(query);
  if (resource === 'checkpoint')
    return { contentType: 'text/plain; charset=utf-8', cacheControl: 'no-cache, max-age=1', body: Buffer.from(log.checkpoint.note) };
  if (resource === 'checkpoint.cosigned') {
    const cosigned = log.cosignedCheckpoint;
    if (cosigned === undefined) throw httpError('not_found', 'No checkpoint of this log was cosigned by the quorum of its witnesses yet.');
    return { contentType: 'text/plain; charset=utf-8', cacheControl: 'no-cache, max-age=1', body: Buffer.from(cosigned) };
  }
  if (resource === 'proof') return json(inclusion(log, params));
  if (resource === 'consistency') return json(consistency(log, params));
  if (resource.startsWith('tile/')) {
    let tile;
    try {
      tile = parseTilePath(resource);
    } catch {
      throw httpError('not_found', 'Not a tile path (C2SP tlog-tiles: tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>]).');
    }
    const bytes = log.tile(tile);
    if (bytes === undefined) throw httpError('not_found', 'The published tree has no such tile yet.');
    return { contentType: 'application/octet-stream', cacheControl: 'public, max-age=31536000, immutable', body: bytes };
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
