import type { IncomingMessage, ServerResponse } from 'node:http';
import { EhbpExchange, readEncapsulatedKey } from '../../ehbp/request-open.ts';
import { sealResponse } from '../../ehbp/sealed-response.ts';
import type { EhbpServerKey } from '../../ehbp/server-key.ts';
import { ENCAPSULATED_KEY_HEADER } from '../../ehbp/suite.ts';
import { hash } from 'node:crypto';
import { HttpError, httpError } from '../../protocol/errors.ts';
import type { ReplayWindow } from '../../limits/replay-window.ts';
import { sealedBody } from '../read-body.ts';

const opened = new WeakMap<IncomingMessage, EhbpExchange>();

/** The exchange whose body was opened for `req`, once the route has read it; undefined for a clear request. */
export function sealedExchangeOf(req: IncomingMessage): EhbpExchange | undefined {
  return opened.get(req);
}

export interface EhbpSettings {
  key: EhbpServerKey;
  required: boolean;
  maxBodyBytes: number;
  /** Encapsulated keys already used: a sealed request seen before is refused before the engine runs. */
  replays: ReplayWindow;
}

/**
 * EHBP, a step of every request (docs/ehbp.md#on-the-server): with EHBP on, a POST is accepted sealed (its body opened
 * when the route reads it, the response sealed from then on) or, unless `ehbp.required`, in the clear.
 */
export function acceptSealed(req: IncomingMessage, res: ServerResponse, settings: EhbpSettings | undefined): void {
  if (req.method === 'POST' && settings !== undefined) acceptEhbp(req, res, settings);
}

/**
 * EHBP on a POST (docs/ehbp.md#on-the-server): with `Ehbp-Encapsulated-Key`, the body is opened when the route reads it (after
 * authentication and admission, like any body) and the response is sealed from then on; errors before
 * that are in the clear, as no context exists yet. Without the header the request is served in the clear,
 * unless `ehbp.required`.
 */
export function acceptEhbp(req: IncomingMessage, res: ServerResponse, settings: EhbpSettings): void {
  // req.headers first: a clear request (the usual one) does not build headersDistinct, which keeps every copy of every header.
  const header = req.headers[ENCAPSULATED_KEY_HEADER] === undefined ? undefined : req.headersDistinct[ENCAPSULATED_KEY_HEADER];
  if (header === undefined) {
    if (settings.required)
      throw httpError(
        'ehbp_required',
        'This service accepts only encrypted bodies (EHBP): encrypt the request to the key at /.well-known/hpke-keys.',
        'Ehbp-Encapsulated-Key',
      );
    return;
  }
  const enc = readEncapsulatedKey(header);
  sealedBody(req, {
    // Framing costs 20 bytes a frame; twice the plaintext bound leaves room for any sane chunking.
    maxSealedBytes: settings.maxBodyBytes * 2 + 65_536,
    open: async (sealed) => {
      const exchange = await EhbpExchange.setup(settings.key, enc);
      try {
        const plaintext = await exchange.open(sealed, settings.maxBodyBytes);
        // Claimed only once the body opened: a forged key cannot fill the window.
        const verdict = await settings.replays.claim(hash('sha256', exchange.enc));
        if (verdict === 'replayed') throw new HttpError('ehbp_replayed', 'This encrypted request was already received: seal every request afresh.');
        if (verdict === 'full')
          throw new HttpError('ehbp_replay_window_full', 'Too many encrypted requests to remember right now; try again shortly.', {
            headers: { 'retry-after': '5' },
          });
        sealResponse(res, exchange);
        opened.set(req, exchange);
        return plaintext;
      } catch (err) {
        if (exchange.authenticated) sealResponse(res, exchange);
        throw err;
      }
    },
  });
}
