import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { HttpError } from '../protocol/errors.ts';

/**
 * Who may use `sigil connect` (docs/connect.md, "Who can use it"): requests addressed to a name connect knows (so a
 * page that rebinds its own name to this address gets nothing), never a web page of another origin (no CORS), and,
 * when connect listens beyond loopback, only an app that sends the local token as its key.
 */

export const LOOPBACK = /^(127(\.\d{1,3}){3}|::1|localhost)$/;

/** A token a guesser cannot reach: 32 characters of anything is at least 128 bits when made by `openssl rand -hex 16`. */
export const MIN_LOCAL_TOKEN_LENGTH = 32;

export interface AccessRules {
  /** Host names accepted besides loopback ones (`--allow-host`), lower case, e.g. `host.docker.internal`. */
  allowHosts: readonly string[];
  /** Set when connect listens beyond loopback: the token every app must send as its key. */
  localToken?: string;
}

/** The host part of a Host header (`[::1]:8480` is `::1`), lower case; undefined when the header is not one. */
function hostName(header: string | undefined): string | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:]+))(?::\d+)?$/.exec(header ?? '');
  return match === null ? undefined : (match[1] ?? match[2])!.toLowerCase();
}

/**
 * Refuses a request whose Host is neither a loopback name nor one allowed: a page whose name was rebound to this
 * address sends its own name. Beyond loopback an IP address is also accepted, since no page can rebind an address.
 */
export function checkHost(req: IncomingMessage, rules: AccessRules): void {
  const name = hostName(req.headers.host);
  if (name !== undefined && (LOOPBACK.test(name) || rules.allowHosts.includes(name) || (rules.localToken !== undefined && isIP(name) !== 0))) return;
  const others = rules.allowHosts.length === 0 ? '' : `, ${rules.allowHosts.join(', ')}`;
  throw new HttpError(
    'invalid_value',
    `sigil connect answers only requests addressed to a loopback host (127.0.0.1, [::1], localhost${others}); --allow-host NAME adds a name, e.g. host.docker.internal.`,
    { param: 'Host' },
  );
}

/**
 * Refuses a request a web page of another origin sent: a browser names the page in `Origin`, and connect answers only
 * pages it served itself (its status page). No CORS header is ever sent, so a foreign page cannot read an answer either.
 */
export function checkOrigin(req: IncomingMessage): void {
  const origin = req.headers.origin;
  if (origin === undefined) return;
  if (origin === `http://${req.headers.host ?? ''}`) return;
  throw new HttpError(
    'cross_origin_refused',
    'sigil connect refuses requests from web pages of other origins: a page you open must not use your verified channel or learn which service you use.',
    { param: 'Origin' },
  );
}

function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** Beyond loopback, the app's key must be the local token: refused (401) without it, never passed on either way. */
export function checkLocalToken(req: IncomingMessage, rules: AccessRules): void {
  if (rules.localToken === undefined) return;
  const authorization = req.headers.authorization;
  if (authorization === undefined)
    throw new HttpError('missing_api_key', 'sigil connect listens beyond loopback: send the local token (SIGIL_CONNECT_TOKEN) as your API key.');
  const token = /^Bearer (.+)$/i.exec(authorization)?.[1] ?? '';
  if (!sameSecret(token, rules.localToken))
    throw new HttpError('invalid_api_key', 'sigil connect listens beyond loopback: the API key sent is not its local token (SIGIL_CONNECT_TOKEN).');
}
