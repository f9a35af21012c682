import type { SecureContextOptions, TLSSocket, TlsOptions } from 'node:tls';

/**
 * TLS 1.2 and 1.3 only. TLS 1.2 is limited to forward-secret AEAD suites (ECDHE with AES-GCM or
 * ChaCha20-Poly1305); TLS 1.3's suites are all AEAD. HTTP/1.1 is the only ALPN protocol offered.
 */
export const TLS_1_2_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

export const TLS_1_3_CIPHERSUITES = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'].join(':');

export function secureContextOptions(credentials: { key: string; cert: string }): SecureContextOptions {
  return {
    key: credentials.key,
    cert: credentials.cert,
    minVersion: 'TLSv1.2',
    maxVersion: 'TLSv1.3',
    ciphers: `${TLS_1_3_CIPHERSUITES}:${TLS_1_2_CIPHERS}`,
    honorCipherOrder: true,
    ecdhCurve: 'X25519:P-256:P-384',
  };
}

/** The server options besides the context: a handshake not done within `handshakeTimeoutMs` is dropped. */
export function tlsServerOptions(credentials: { key: string; cert: string }, handshakeTimeoutMs: number): TlsOptions {
  return { ...secureContextOptions(credentials), ALPNProtocols: ['http/1.1'], handshakeTimeout: handshakeTimeoutMs };
}

/**
 * Called on every secure connection: a TLS 1.2 client that asks to renegotiate is disconnected (TLS 1.3 has no
 * renegotiation). Renegotiation buys a client nothing here and costs the server a handshake each time, as nginx and
 * Envoy refuse it too.
 */
export function refuseRenegotiation(socket: TLSSocket): void {
  socket.disableRenegotiation();
}
