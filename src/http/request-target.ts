/** The parts of a request target the routes use: the path as sent, and the query. */
export interface RequestTarget {
  readonly pathname: string;
  readonly searchParams: URLSearchParams;
}

const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*/i;

/** A request target; its query is parsed only when a route reads it (most never do). */
class ParsedTarget implements RequestTarget {
  readonly pathname: string;
  readonly #query: string;
  #searchParams: URLSearchParams | undefined;

  constructor(pathname: string, query: string) {
    this.pathname = pathname;
    this.#query = query;
  }

  get searchParams(): URLSearchParams {
    return (this.#searchParams ??= new URLSearchParams(this.#query));
  }
}

/**
 * Splits a request target without a URL parser, which would throw on odd targets (`//:/v1`) and
 * would read `//host/path` as a host. Absolute-form targets (RFC 9112 3.2.2) keep only their path;
 * the path is not normalised, so `..` segments match no route.
 */
export function parseRequestTarget(raw: string): RequestTarget {
  // Origin form (`/v1/...`), nearly every request, needs no regular expression.
  const origin = raw.charCodeAt(0) === 0x2f ? raw : raw.replace(ABSOLUTE_FORM, '');
  const target = origin === '' || origin.startsWith('?') ? `/${origin}` : origin;
  const q = target.indexOf('?');
  return q === -1 ? new ParsedTarget(target, '') : new ParsedTarget(target.slice(0, q), target.slice(q + 1));
}
