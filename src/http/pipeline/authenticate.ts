import type { IncomingMessage } from 'node:http';
import type { Caller } from '../../auth/bearer.ts';
import type { AppContext } from '../context.ts';

/**
 * Authenticate: the caller the bearer key names, before anything else of the exchange happens (no budget
 * taken, no byte of the body read); 401 `missing_api_key` or `invalid_api_key` otherwise (docs/api.md#errors).
 */
export function authenticate(req: IncomingMessage, ctx: AppContext): Caller {
  return ctx.keyRing.authenticate(req.headers);
}
