import type { BrandHeaders } from '../../protocol/brand-headers.ts';
import { httpError } from '../../protocol/errors.ts';

/** The headers every request may carry once only, whatever the brand. */
const ONCE = ['authorization', 'host', 'content-type'] as const;

/**
 * Refuse duplicate headers, the first step of every request: copies of these would let a front proxy and
 * Sigil read different requests (docs/decisions.md#hostile-peers), as Node keeps the first copy and another hop may
 * keep the last. 400 `duplicate_header`, its `param` the header's name.
 */
export function refuseDuplicateHeaders(headers: NodeJS.Dict<string[]>, brand: BrandHeaders): void {
  for (const name of ONCE) refuseTwice(headers, name);
  refuseTwice(headers, brand.receipt);
  refuseTwice(headers, brand.nonce);
}

function refuseTwice(headers: NodeJS.Dict<string[]>, name: string): void {
  if ((headers[name]?.length ?? 0) > 1) throw httpError('duplicate_header', `The ${name} header must be sent once.`, name);
}
