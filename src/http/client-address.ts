import type { IncomingMessage } from 'node:http';
import { isIP, type BlockList } from 'node:net';

/**
 * The address a request came from: the peer's, unless the peer is a trusted proxy (`listen.trusted_proxies`); then
 * the last address in X-Forwarded-For that is not itself a trusted proxy, read from the right as nginx's
 * `real_ip_recursive on` and Envoy's `xff_num_trusted_hops` do, so a client cannot name itself by sending the header.
 */
export function clientAddress(req: IncomingMessage, trusted: BlockList | undefined): string {
  const peer = normalise(req.socket.remoteAddress ?? '');
  if (trusted === undefined || !isTrusted(peer, trusted)) return peer;
  const header = req.headers['x-forwarded-for'];
  if (header === undefined) return peer;
  const hops = (Array.isArray(header) ? header.join(',') : header).split(',').map((hop) => normalise(hop.trim()));
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    // Garbage in the header ends the walk: the last good hop is as far as trusted proxies vouch.
    if (isIP(hop) === 0) break;
    client = hop;
    if (!isTrusted(hop, trusted)) break;
  }
  return client;
}

function normalise(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

function isTrusted(address: string, trusted: BlockList): boolean {
  const family = isIP(address);
  return family !== 0 && trusted.check(address, family === 6 ? 'ipv6' : 'ipv4');
}
