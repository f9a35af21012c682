import type { BrandHeaders } from '../../protocol/brand-headers.ts';
import { httpError } from '../../protocol/errors.ts';

/** The headers every request may carry once only, whatever the brand (`x-api-key`: Anthropic clients' key). */
const ONCE = ['authorization', 'x-api-key', 'host', 'content-type'] as const;

/**
 * Refuse duplicate headers, the first step of every request: copies of these would let a front proxy and
 * Sigil read different requests (docs/decisions.md#hostile-peers), as Node keeps the first copy and another hop may
 * keep the last. 400 `duplicate_header`, its `param` the header's name.
 *
 * It walks the request's raw headers (`req.rawHeaders`: name, value, name, value...) once, lower-casing only a
 * name as long as one it looks for: `req.headersDistinct` would build an object of arrays for every request.
 */
export function refuseDuplicateHeaders(rawHeaders: readonly string[], brand: BrandHeaders): void {
  const once = [...ONCE, brand.receipt, brand.nonce];
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const raw = rawHeaders[i]!;
    for (let k = 0; k < once.length; k++) {
      const name = once[k]!;
      if (raw.length !== name.length || raw.toLowerCase() !== name) continue;
      if ((seen & (1 << k)) !== 0) throw httpError('duplicate_header', `The ${name} header must be sent once.`, name);
      seen |= 1 << k;
      break;
    }
  }
}
