/**
 * What the primary and its workers say to each other over the cluster's IPC channel (a socket pair
 * between the two processes: never a file, an argument or the environment). Keys travel only here.
 */
import type { AttestationDocumentV2 } from '../attestation/document.ts';
import type { Catalogue } from '../catalogue/catalogue.ts';
import type { LoadedConfig } from '../config/load.ts';
import type { Jwks, KeyOrigins, TransparencyLogBinding } from '../protocol/attestation.ts';
import type { ErrorCode } from '../protocol/errors.ts';
import type { LogDocument } from '../tlog/served-log.ts';
import type { ReceiptContext } from '../receipts/claims.ts';
import type { ReceiptOwner } from '../receipts/store.ts';
import type { SigningKey } from '../receipts/signing-key.ts';
import type { ServedTls } from '../tls/provision.ts';
import type { TlsCredentials } from '../tls/credentials.ts';
import type { EvidenceSources } from '../attestation/document.ts';
import type { FleetHealth } from '../fleet/connection.ts';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';

/** The parts of the context a reload changes, as the primary measured them. */
export interface ReloadedParts {
  catalogue: Catalogue;
  receiptContext: ReceiptContext;
  start: AttestationDocumentV2;
  documents: { policy: string; startEvidence: string };
  eventLog: EvidenceSources['eventLog'];
  manifestSha384: string | null;
}

/** Everything a worker serves from, made once by the primary. */
export interface Handoff extends ReloadedParts {
  type: 'sigil:handoff';
  workerId: number;
  /** The configuration as the primary runs it (with the built-in engine's upstream when it started one). */
  config: LoadedConfig;
  signingKey: { pkcs8: Uint8Array; origin: SigningKey['origin']; file?: string };
  ehbp?: { privateKey: Uint8Array; keyConfig: Uint8Array };
  tls?: { mode: ServedTls['mode']; credentials: TlsCredentials; keyOrigin: KeyOrigins['receipt'] };
  jwks: Jwks;
  documents: { jwks: string; policy: string; startEvidence: string };
  tlsSpkiSha256: string | null;
  hpkeKeyConfig: string | null;
  keyOrigin: KeyOrigins | undefined;
  /** Fleet mode: the primary holds the fleet's connection; the worker gets its name and views, kept current by messages. */
  fleet?: { replicaId: string; health: FleetHealth; revoked: string[] };
  /** The transparency log's origin and key, which the worker's fresh attestations bind; the log itself stays in the primary. */
  transparencyLog?: TransparencyLogBinding;
}

/** The primary's answer to `log.read`: the resource, or the catalogue error the worker sends instead. */
export type LogReply = LogDocument | { error: { code: ErrorCode; message: string; param: string | null } };
/** The answer to log.append: the leaf index once the entry is on disk, or the catalogue error (503 log_unavailable). */
export type LogAppendReply = number | { error: { code: ErrorCode; message: string; param: string | null } };

export type ReceiptCall =
  { op: 'receipts.put'; receiptId: string; owner: ReceiptOwner; jws: string } | { op: 'receipts.get'; receiptId: string; owner: ReceiptOwner };

/** A call the worker awaits an answer to. */
export type PrimaryCall =
  | { op: 'limits.admit'; keyHash: string }
  | ReceiptCall
  | { op: 'replays.claim'; id: string }
  | { op: 'metrics.scrape' }
  /** More of the memory budget for the worker's lease: `bytes` if the budget has them, else `least`, else nothing; answered with the bytes granted. */
  | { op: 'budget.lease'; bytes: number; least: number }
  /**
   * A receipt's log entry (SHA-256 of its bytes, in base64: a string crosses the channel for less than a typed array,
   * which node's serializer copies in JavaScript) for the primary's sequencer; answered with its leaf index once the entry is on disk (LogAppendReply).
   */
  | { op: 'log.append'; entry: string; receiptId: string }
  /** GET /v1/log/<resource>?<query>, answered from the primary's log as a LogReply. */
  | { op: 'log.read'; resource: string; query: string };

/** A message the worker does not wait on: an admitted request has finished, or leased bytes of the memory budget come back. */
export type PrimaryNotice = { op: 'limits.finish'; keyHash: string; tokensUsed: number } | { op: 'budget.return'; bytes: number };

/** One turn of the worker's event loop's calls and notices, in the order made: one IPC message, however many requests. */
export type CallBatch = Array<{ id: number; call: PrimaryCall } | { notice: PrimaryNotice }>;

export type Answer = { id: number; value?: unknown; error?: string };

/** `sigil:waiting`: the worker listens for its hand-off (a message sent before that would be lost). */
export type ToPrimary =
  | { type: 'sigil:waiting' }
  | { type: 'sigil:calls'; calls: CallBatch }
  | { type: 'sigil:listening'; url: string }
  /** The answer to `sigil:metrics-request`: this worker's registry, as prom-client's JSON. */
  | { type: 'sigil:metrics'; id: number; metrics: Array<MetricObjectWithValues<MetricValue<string>>> };

export type ToWorker =
  | Handoff
  | { type: 'sigil:answers'; answers: Answer[] }
  | ({ type: 'sigil:reload' } & ReloadedParts)
  | { type: 'sigil:tls'; credentials: TlsCredentials }
  | { type: 'sigil:drain'; graceMs: number; drainMs: number }
  | { type: 'sigil:metrics-request'; id: number }
  | { type: 'sigil:jwks'; jwks: Jwks }
  | { type: 'sigil:revoked'; keyHash: string }
  | { type: 'sigil:fleet-health'; health: FleetHealth };

export function isWorkerMessage(m: unknown): m is ToWorker {
  return typeof m === 'object' && m !== null && typeof (m as { type?: unknown }).type === 'string' && (m as { type: string }).type.startsWith('sigil:');
}
