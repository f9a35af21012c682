/**
 * Every name this fleet uses in Redis, under one namespace so that several fleets (or a test) can
 * share a server. Single-instance Redis is assumed: scripts read keys they derive from a prefix.
 */
export interface FleetKeys {
  /** ZSET kid → last heartbeat (Redis clock, ms). Live, retired or pruned is decided from the score. */
  signingKeys: string;
  /** STRING per kid: the published JWK and its attestation document; expires when it can no longer be served. */
  signingKeyPrefix: string;
  /** STRING per kid: the replica's latest heartbeat, a JWS its own key signed; liveness is read from it, never from a score. */
  heartbeatPrefix: string;
  /** ZSET API-key hash → revocation time (ms). Permanent: a revoked key never comes back. */
  revokedApiKeys: string;
  /** HASH per kid: the admitting replica's kid → the hex nonce it chose for that key's fresh evidence. */
  challengePrefix: string;
  /** HASH per kid: the admitting replica's kid → the evidence the key's replica made for that nonce (JSON). */
  answerPrefix: string;
  /** Pub/sub: a revoked API-key hash. */
  revocationChannel: string;
  /** Pub/sub: a kid that just joined, so peers refresh their JWKS at once. */
  membershipChannel: string;
  /** Fixed-window counters: `<prefix><name>:<window index>`. */
  windowPrefix: string;
  /** ZSET per name of concurrency slots: token → expiry (ms). */
  slotPrefix: string;
  /** STRING per receipt, named by an HMAC of its id under the owner's key, its value sealed for the owner; the retention as PX. */
  receiptPrefix: string;
  /** STRING per sealed request seen: the SHA-256 of its encapsulated key, with the replay window as PX. */
  replayPrefix: string;
}

export function fleetKeys(namespace: string): FleetKeys {
  const ns = `${namespace}:`;
  return {
    signingKeys: `${ns}signing-keys`,
    signingKeyPrefix: `${ns}signing-key:`,
    heartbeatPrefix: `${ns}heartbeat:`,
    revokedApiKeys: `${ns}revoked-api-keys`,
    challengePrefix: `${ns}challenge:`,
    answerPrefix: `${ns}answer:`,
    revocationChannel: `${ns}revocations`,
    membershipChannel: `${ns}members`,
    windowPrefix: `${ns}window:`,
    slotPrefix: `${ns}slots:`,
    receiptPrefix: `${ns}receipt:`,
    replayPrefix: `${ns}ehbp-seen:`,
  };
}
