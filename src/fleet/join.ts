import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { AttestationDocumentV2, Jwks } from '../protocol/attestation.ts';
import { readKeysFile } from '../auth/keys-file.ts';
import { ConfigError, type LoadedConfig } from '../config/load.ts';
import type { SigilConfig } from '../config/schema.ts';
import type { Logger } from '../logger/logger.ts';
import type { SigningKey } from '../receipts/signing-key.ts';
import type { TrustRoots } from '../verify/attestation.ts';
import { FleetConnection, type FleetHealth, type FleetStatus } from './connection.ts';
import { KeyRegistry } from './key-registry.ts';
import type { MeasuredSide } from './measured-state.ts';
import type { FreshEvidence } from './peer-admission.ts';
import { RedisLimitCounters } from './limit-counters.ts';
import { RedisReceiptStore } from './receipt-store.ts';
import { RedisReplayWindow } from './replay-window.ts';
import { fleetKeys } from './redis-keys.ts';
import { FleetKeyRing, recordRevocation, RevocationWatcher } from './revocations.ts';
import { FleetUnreachable } from './fleet-unreachable.ts';

export type FleetConfig = NonNullable<SigilConfig['fleet']>;

/** The parts of a replica that the fleet shares; the server uses them in place of the local ones. */
export interface Fleet {
  readonly status: FleetStatus;
  readonly keyRing: FleetKeyRing;
  readonly counters: RedisLimitCounters;
  readonly receiptStore: RedisReceiptStore;
  readonly replayWindow: RedisReplayWindow;
  /** The JWKS to serve now: this replica's key and its admitted peers'. */
  readonly jwks: Jwks;
  /** Called with the new JWKS whenever the fleet's view changes. */
  onJwks(listener: (jwks: Jwks) => void): void;
  /** The API-key hashes the fleet revoked, as known now. */
  readonly revoked: ReadonlySet<string>;
  /** Called with each key hash newly revoked. */
  onRevoked(listener: (keyHash: string) => void): void;
  /** Called when Redis becomes reachable or unreachable. */
  onHealth(listener: (health: FleetHealth) => void): void;
  /** Retires this replica's signing key and closes the connections. */
  close(): Promise<void>;
}

export interface JoinFleetParts {
  logger: Logger;
  signingKey: SigningKey;
  /** The attestation document made at start, binding exactly this replica's key. */
  startDocument: AttestationDocumentV2;
  /** The manifest text the start document names; null or absent without hardware. */
  manifest?: string | null;
  /** This replica's measured state now (remade at each reload); default: the start document and manifest. */
  current?: () => MeasuredSide;
  /** Makes evidence for a peer's nonce, binding exactly this replica's key (docs: deploy/README.md, "The JWKS"). */
  attest?: (nonce: Uint8Array) => Promise<Omit<FreshEvidence, 'nonce'>>;
  /** The AMD and Intel roots peers' evidence must chain to; the built-in ones unless a test brings its own. */
  roots?: TrustRoots;
  /** For tests: the clock of the per-key rate windows; default `Date.now`. */
  now?: () => number;
}

/**
 * A replica's name from SIGIL_REPLICA_ID (e.g. a pod name), when set and well formed. Not measured: it only names the
 * replica, and a name in the shared config file would make every replica's manifest differ (deploy/README.md).
 */
function replicaIdFromEnvironment(): string | undefined {
  const id = process.env.SIGIL_REPLICA_ID;
  if (id !== undefined && !/^[A-Za-z0-9._-]{1,64}$/.test(id))
    throw new ConfigError('SIGIL_REPLICA_ID must be 1-64 letters, digits, dots, dashes or underscores');
  return id;
}

export function connectionOptions(fleet: FleetConfig, name: string, logger: Logger) {
  return { url: fleet.redis_url, commandTimeoutMs: fleet.command_timeout_ms, connectTimeoutMs: fleet.connect_timeout_ms, name, logger };
}

/**
 * Joins the fleet that `fleet` (the config's `fleet` section) names. Redis being unreachable at start is not an error: the
 * replica starts degraded, on local state, and joins when Redis answers.
 */
export async function joinFleet(fleet: FleetConfig, config: LoadedConfig, parts: JoinFleetParts): Promise<Fleet> {
  const logger = parts.logger.child({ fleet: fleet.namespace });
  const replicaId = fleet.replica_id ?? replicaIdFromEnvironment() ?? `${hostname()}-${randomBytes(3).toString('hex')}`;
  const keys = fleetKeys(fleet.namespace);
  const connection = new FleetConnection(connectionOptions(fleet, `sigil:${replicaId}`, logger));
  const subscriber = connection.duplicate(`sigil:${replicaId}:sub`);

  const watcher = new RevocationWatcher({ connection, subscriber, keys, pollMs: fleet.revocation_poll_ms, logger });
  const registry = new KeyRegistry({
    connection,
    keys,
    replicaId,
    signingKey: parts.signingKey,
    attestation: parts.startDocument,
    manifest: parts.manifest ?? null,
    ...(parts.attest === undefined ? {} : { attest: parts.attest }),
    ttlMs: fleet.key_ttl_s * 1000,
    retentionMs: config.receipts.retention_s * 1000,
    admission: {
      ours: parts.current ?? (() => ({ doc: parts.startDocument, manifest: parts.manifest ?? null })),
      trusted: {
        measurements: new Set([parts.startDocument.measurement.toLowerCase(), ...fleet.trusted_measurements]),
        manifests: new Set(fleet.trusted_manifests),
      },
      admitUnattested: fleet.admit_unattested_peers,
      admitLoaded: fleet.admit_loaded_keys,
      ...(parts.roots === undefined ? {} : { roots: parts.roots }),
    },
    logger,
  });
  subscriber.client.on('message', (channel: string) => {
    if (channel === keys.membershipChannel) void registry.refresh();
  });
  subscriber.client.on('ready', () => {
    subscriber.client.subscribe(keys.revocationChannel, keys.membershipChannel).catch(() => undefined);
  });
  connection.onHealth((health) => {
    if (health !== 'up') return;
    void watcher.poll();
    void registry.refresh();
  });

  const [health] = await Promise.all([connection.connect(fleet.connect_timeout_ms), subscriber.connect(fleet.connect_timeout_ms)]);
  if (health === 'degraded') logger.warn({ replica_id: replicaId }, 'fleet: Redis not reachable at start; running on local state and retrying');
  await Promise.all([watcher.start(), registry.start()]);
  logger.info({ replica_id: replicaId, kid: parts.signingKey.kid, health, jwks_keys: registry.jwks.keys.length }, 'fleet: joined');

  return {
    status: { replicaId, health: () => connection.health },
    keyRing: new FleetKeyRing(readKeysFile(config.auth.keys_file), watcher.revoked),
    counters: new RedisLimitCounters(connection, keys, { logger, now: parts.now }),
    receiptStore: new RedisReceiptStore(connection, keys, {
      retentionS: config.receipts.retention_s,
      maxEntries: config.receipts.max_stored,
      jwks: () => registry.jwks,
      logger,
    }),
    replayWindow: new RedisReplayWindow(connection, keys, { windowS: config.ehbp.replay_window_s, maxEntries: config.ehbp.replay_max_entries }),
    get jwks() {
      return registry.jwks;
    },
    onJwks: (listener) => registry.onChange(listener),
    revoked: watcher.revoked,
    onRevoked: (listener) => watcher.onRevoked(listener),
    onHealth: (listener) => void connection.onHealth(listener),
    async close() {
      watcher.stop();
      await registry.stop();
      await Promise.all([subscriber.close(), connection.close()]);
    },
  };
}

/**
 * `sigil keys revoke` in fleet mode: records the revoked hash in Redis and announces it, so every
 * replica refuses the key within seconds. Rejects when Redis cannot be reached.
 */
export async function revokeAcrossFleet(fleet: FleetConfig, keyHash: string, logger: Logger): Promise<void> {
  const connection = new FleetConnection(connectionOptions(fleet, 'sigil:keys-revoke', logger));
  try {
    if ((await connection.connect(fleet.connect_timeout_ms)) !== 'up')
      throw new FleetUnreachable(
        `the key is out of this keys file, but Redis at ${new URL(fleet.redis_url).host} is not reachable: other replicas accept it until their keys files change`,
      );
    await recordRevocation(connection, fleetKeys(fleet.namespace), keyHash);
  } finally {
    await connection.close();
  }
}
