/** The parts of a request target the routes use: the path as sent, and the query. */
export interface RequestTarget {
  pathname: string;
  searchParams: URLSearchParams;
}

const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*/i;

/**
 * Splits a request target without a URL parser, which would throw on odd targets (`//:/v1`) and
 * would read `//host/path` as a host. Absolute-form targets (RFC 9112 3.2.2) keep only their path;
 * the path is not normalised, so `..` segments match no route.
 */
export function parseRequestTarget(raw: string): RequestTarget {
  const origin = raw.replace(ABSOLUTE_FORM, '');
  const target = origin === '' || origin.startsWith('?') ? `/${origin}` : origin;
  const q = target.indexOf('?');
  return q === -1
    ? { pathname: target, searchParams: new URLSearchParams() }
    : { pathname: target.slice(0, q), searchParams: new URLSearchParams(target.slice(q + 1)) };
}
