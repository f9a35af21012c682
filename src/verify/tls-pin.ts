import { createHash } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { Agent, buildConnector } from 'undici';
import { VerifyError } from './errors.ts';

export { tlsBindingCheck } from './tls-key.ts';

/** Lowercase hex SHA-256 of the DER SubjectPublicKeyInfo a TLS server presented: what `binding.tls_spki_sha256` states. */
export function presentedSpkiSha256(socket: TLSSocket): string | undefined {
  const certificate = socket.getPeerX509Certificate();
  if (certificate === undefined) return undefined;
  return createHash('sha256')
    .update(certificate.publicKey.export({ type: 'spki', format: 'der' }))
    .digest('hex');
}

/** The error a pinned connection fails with; `presented` is the key the server showed, `accepted` the ones we trust. */
export class TlsPinError extends VerifyError {
  constructor(
    readonly presented: string | undefined,
    readonly accepted: readonly string[],
  ) {
    super(
      'ERR_VERIFY_TLS_PIN',
      presented === undefined
        ? 'the server presented no certificate'
        : `the server presented TLS key sha256:${presented}, not the attested ${accepted.map((k) => `sha256:${k}`).join(' or ')}: the connection was closed before any request byte was sent`,
    );
  }
}

/**
 * The TLS keys a client accepts. Until one is pinned, the first key seen is pinned (so every connection of
 * one verification talks to the same server); `accept` adds keys an attestation vouched for.
 */
export class SpkiPin {
  private readonly keys = new Set<string>();

  constructor(initial: Iterable<string> = []) {
    for (const key of initial) this.keys.add(key);
  }

  get accepted(): string[] {
    return [...this.keys];
  }

  accept(spki: string): void {
    this.keys.add(spki);
  }

  /** Whether a connection presenting `spki` may carry requests; the first key seen pins itself. */
  admits(spki: string): boolean {
    if (this.keys.size === 0) this.keys.add(spki);
    return this.keys.has(spki);
  }
}

export interface PinnedTlsOptions {
  /** Extra CA certificates (PEM); trust rests on the pin, so CA and name checks are not what protects the connection. */
  ca?: string | undefined;
}

/**
 * An undici connector that checks the presented key once the handshake is done and before undici writes
 * a single request byte: a key the pin does not admit closes the socket and fails the request.
 * Certificate issuers and names are not what is trusted: the hardware report vouches for the key itself.
 */
export function pinningConnector(pin: SpkiPin, options: PinnedTlsOptions = {}): buildConnector.connector {
  // No session resumption: a resumed session shows no certificate, and every connection must show its key.
  const connect = buildConnector({ rejectUnauthorized: false, maxCachedSessions: 0, ...(options.ca === undefined ? {} : { ca: options.ca }) });
  return (opts, callback) =>
    connect(opts, (err, socket) => {
      if (err !== null) return callback(err, null);
      if (opts.protocol !== 'https:') return callback(null, socket);
      const presented = presentedSpkiSha256(socket as TLSSocket);
      if (presented !== undefined && pin.admits(presented)) return callback(null, socket);
      socket.destroy();
      callback(new TlsPinError(presented, pin.accepted), null);
    });
}

/** A dispatcher whose every TLS connection must present a key `pin` admits. */
export function pinnedAgent(pin: SpkiPin, options: PinnedTlsOptions = {}): Agent {
  return new Agent({ connect: pinningConnector(pin, options) });
}

/** The pin found in an undici failure (`fetch failed` wraps the connector's error as its cause). */
export function tlsPinErrorOf(err: unknown): TlsPinError | undefined {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof TlsPinError) return e;
  }
  return undefined;
}
