import { randomBytes } from 'node:crypto';
import type { AttestationDocumentV2, Jwks } from '../protocol/attestation.ts';
import type { Logger } from '../logger/logger.ts';
import type { SigningKey } from '../receipts/signing-key.ts';
import type { FleetConnection } from './connection.ts';
import { admitPeerKey, type AdmissionPolicy, type FreshEvidence, type PublicJwk, type PublishedKey } from './peer-admission.ts';
import { readHeartbeat, signHeartbeat } from './heartbeat.ts';
import type { FleetKeys } from './redis-keys.ts';
import { REDIS_NOW_MS, RedisScript } from './script.ts';

/** Marks the key alive; returns 0 when its entry is gone (first start, or Redis lost it) so the caller re-sends it. */
const HEARTBEAT = new RedisScript(`${REDIS_NOW_MS}
redis.call('ZADD', KEYS[1], now, ARGV[1])
return redis.call('PEXPIRE', KEYS[2], ARGV[2])`);

const PUBLISH = new RedisScript(`${REDIS_NOW_MS}
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
return now`);

/** Back-dates the last heartbeat by one TTL: the key is retired from now on, and kept for the retention window. */
const RETIRE = new RedisScript(`${REDIS_NOW_MS}
return redis.call('ZADD', KEYS[1], 'XX', now - tonumber(ARGV[2]), ARGV[1])`);

/** Prunes keys retired longer than the retention window and lists the rest: kid, last heartbeat, ... */
const LIST = new RedisScript(`${REDIS_NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
return redis.call('ZRANGE', KEYS[1], 0, -1)`);

export interface KeyRegistryOptions {
  connection: FleetConnection;
  keys: FleetKeys;
  replicaId: string;
  signingKey: SigningKey;
  /** This replica's start evidence, binding `{keys: [its JWK]}` with an empty nonce. */
  attestation: AttestationDocumentV2;
  /** The manifest text the start evidence names (null without hardware), published so a refusal can name what differs. */
  manifest?: string | null;
  /** Makes evidence now for a peer's nonce, binding `{keys: [this replica's JWK]}`; absent, peers' challenges go unanswered. */
  attest?: (nonce: Uint8Array) => Promise<Omit<FreshEvidence, 'nonce'>>;
  /** A key whose replica has not refreshed it for this long is retired. */
  ttlMs: number;
  /** How long a retired key stays in the JWKS: the receipt retention. */
  retentionMs: number;
  admission: AdmissionPolicy;
  logger: Logger;
}

/** The refresh runs this many times per TTL, so one or two missed refreshes do not retire a live key. */
const REFRESHES_PER_TTL = 3;

/** Challenges answered per refresh: each costs a hardware report, and whoever writes to Redis can add challenges. */
const ANSWERS_PER_REFRESH = 4;

const NONCE_HEX = /^[0-9a-f]{64}$/;

/** Whether an answer read from Redis is for `nonce` (anything unreadable is not). */
function answersNonce(answer: string, nonce: string): boolean {
  try {
    return (JSON.parse(answer) as { nonce?: unknown }).nonce === nonce;
  } catch {
    return false;
  }
}

interface Verdict {
  jwk: PublicJwk | null;
  seenAt: number;
  lastBeat: number;
  refused?: string;
  /** On hardware, until the peer answers: the nonce this replica chose for its fresh evidence. */
  challenge?: string;
}

/**
 * The fleet's signing keys. Each replica publishes its public key with its start evidence, and
 * every TTL/3 a heartbeat its key signs (and a ZSET score, by which peers find it). On hardware a peer
 * key is admitted on evidence its replica made for a nonce this replica chose (#admit). Every replica
 * serves as its JWKS its own key plus every admitted peer key whose latest signed heartbeat is younger
 * than TTL + retention by this replica's clock: live keys, and keys retired within the receipt
 * retention window. Redis can hide a key, never make one live: the score only lists it. When Redis is
 * unreachable the last good view stays in use.
 */
export class KeyRegistry {
  readonly #o: KeyRegistryOptions;
  readonly #own: PublicJwk;
  readonly #entry: string;
  /** Admission verdicts per kid, so a peer's evidence is verified once, not at every refresh. */
  readonly #verdicts = new Map<string, Verdict>();
  /** The nonce last answered per admitting replica's kid, so each challenge costs one report. */
  readonly #answered = new Map<string, string>();
  readonly #listeners = new Set<(jwks: Jwks) => void>();
  #view: Jwks;
  #viewText: string;
  #timer: NodeJS.Timeout | undefined;
  #refreshing: Promise<void> | undefined;

  constructor(options: KeyRegistryOptions) {
    this.#o = options;
    this.#own = options.signingKey.publicJwk as unknown as PublicJwk;
    const entry: PublishedKey = {
      replica_id: options.replicaId,
      kid: options.signingKey.kid,
      attestation: options.attestation,
      manifest: options.manifest ?? null,
      published_at: new Date().toISOString(),
    };
    this.#entry = JSON.stringify(entry);
    this.#view = { keys: [{ ...this.#own }] };
    this.#viewText = JSON.stringify(this.#view);
  }

  /** The JWKS to serve now. */
  get jwks(): Jwks {
    return this.#view;
  }

  onChange(listener: (jwks: Jwks) => void): void {
    this.#listeners.add(listener);
  }

  /** Publishes this replica's key, reads the fleet's, and keeps both fresh until `stop`. */
  async start(): Promise<void> {
    await this.refresh();
    this.#timer = setInterval(() => void this.refresh(), Math.max(100, Math.floor(this.#o.ttlMs / REFRESHES_PER_TTL)));
    this.#timer.unref();
  }

  /** One heartbeat and one re-read; concurrent callers share the one in progress. Never rejects. */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#refresh().finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  /** Stops refreshing and marks this replica's key retired (best effort: otherwise it retires by TTL). */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#refreshing;
    if (!this.#o.connection.up) return;
    await RETIRE.run(this.#o.connection.client, [this.#o.keys.signingKeys], [this.#own.kid, this.#o.ttlMs]).catch(() => undefined);
  }

  async #refresh(): Promise<void> {
    const { connection, keys } = this.#o;
    if (!connection.up) return;
    try {
      const client = connection.client;
      const entryKey = keys.signingKeyPrefix + this.#own.kid;
      const entryTtl = this.#o.ttlMs + this.#o.retentionMs;
      const alive = await HEARTBEAT.run(client, [keys.signingKeys, entryKey], [this.#own.kid, entryTtl]);
      await client.set(keys.heartbeatPrefix + this.#own.kid, signHeartbeat(this.#o.signingKey, this.#o.replicaId, Date.now()), 'PX', entryTtl);
      if (Number(alive) === 0) {
        await PUBLISH.run(client, [keys.signingKeys, entryKey], [this.#own.kid, entryTtl, this.#entry]);
        await client.publish(keys.membershipChannel, this.#own.kid);
      }
      await this.#answerChallenges(entryTtl);
      const kids = (await LIST.run(client, [keys.signingKeys], [entryTtl])) as string[];
      const unknown = kids.filter((kid) => kid !== this.#own.kid && (!this.#verdicts.has(kid) || this.#verdicts.get(kid)!.challenge !== undefined));
      const entries = unknown.length === 0 ? [] : await client.mget(unknown.map((kid) => keys.signingKeyPrefix + kid));
      for (const [i, kid] of unknown.entries()) {
        const text = entries[i];
        if (text === null || text === undefined) continue;
        const verdict = await this.#admit(kid, text, entryTtl);
        if (verdict.refused !== undefined) this.#o.logger.warn({ kid, reason: verdict.refused }, 'fleet: a peer signing key is not served');
        this.#verdicts.set(kid, verdict);
      }
      await this.#readHeartbeats(kids);
      const now = Date.now();
      for (const kid of kids) {
        const verdict = this.#verdicts.get(kid);
        if (verdict !== undefined) verdict.seenAt = now;
      }
      // A key Redis no longer lists (pruned, or lost with a Redis restart) is still served until its window ends here.
      for (const [kid, verdict] of this.#verdicts) if (verdict.seenAt <= now - entryTtl) this.#verdicts.delete(kid);
      this.#setView();
    } catch (err) {
      this.#o.connection.noteFailure(err);
      this.#o.logger.debug({ err: (err as Error).message }, 'fleet: key registry not refreshed; the last view stays');
    }
  }

  /**
   * The verdict on a peer key not yet admitted. Without hardware, from its published start document. On hardware, from
   * fresh evidence: this replica writes a nonce of its own choosing under the key, the key's replica answers with evidence
   * for that nonce, and only that answer is verified; until it comes the key is pending (not served).
   */
  async #admit(kid: string, entryText: string, entryTtl: number): Promise<Verdict> {
    const { admission, connection, keys } = this.#o;
    if (admission.ours().doc.tee === 'none') {
      const admitted = await admitPeerKey(entryText, kid, admission);
      return 'jwk' in admitted ? { jwk: admitted.jwk, seenAt: 0, lastBeat: 0 } : { jwk: null, seenAt: 0, lastBeat: 0, refused: admitted.rejected };
    }
    const asked = this.#verdicts.get(kid)?.challenge;
    const challenge = asked ?? randomBytes(32).toString('hex');
    const answer = asked === undefined ? null : await connection.client.hget(keys.answerPrefix + kid, this.#own.kid);
    if (answer !== null && answersNonce(answer, challenge)) {
      const admitted = await admitPeerKey(entryText, kid, admission, { nonce: Buffer.from(challenge, 'hex'), answer });
      return 'jwk' in admitted ? { jwk: admitted.jwk, seenAt: 0, lastBeat: 0 } : { jwk: null, seenAt: 0, lastBeat: 0, refused: admitted.rejected };
    }
    // Written again at each refresh while pending: Redis may have lost it.
    await connection.client.hset(keys.challengePrefix + kid, this.#own.kid, challenge);
    await connection.client.pexpire(keys.challengePrefix + kid, entryTtl);
    // Once, so the peer answers at once; not at every refresh, which this replica's own subscription would turn into a loop.
    if (asked === undefined) await connection.client.publish(keys.membershipChannel, kid);
    return { jwk: null, seenAt: 0, lastBeat: 0, challenge };
  }

  /** Answers the nonces peers wrote under this replica's key with evidence made now, each once. */
  async #answerChallenges(entryTtl: number): Promise<void> {
    const { attest, connection, keys } = this.#o;
    if (attest === undefined) return;
    const challenges = await connection.client.hgetall(keys.challengePrefix + this.#own.kid);
    for (const admitter of this.#answered.keys()) if (!(admitter in challenges)) this.#answered.delete(admitter);
    const open = Object.entries(challenges).filter(([admitter, nonce]) => NONCE_HEX.test(nonce) && this.#answered.get(admitter) !== nonce);
    for (const [admitter, nonce] of open.slice(0, ANSWERS_PER_REFRESH)) {
      const evidence = await attest(Buffer.from(nonce, 'hex'));
      const answer: FreshEvidence = { nonce, ...evidence };
      await connection.client.hset(keys.answerPrefix + this.#own.kid, admitter, JSON.stringify(answer));
      await connection.client.pexpire(keys.answerPrefix + this.#own.kid, entryTtl);
      this.#answered.set(admitter, nonce);
    }
    if (open.length > 0) await connection.client.publish(keys.membershipChannel, this.#own.kid);
  }

  /** Moves each admitted peer's last sign of life forward from the heartbeat it signed; Redis's word alone moves nothing. */
  async #readHeartbeats(kids: string[]): Promise<void> {
    const admitted = kids.filter((kid) => kid !== this.#own.kid && (this.#verdicts.get(kid)?.jwk ?? null) !== null);
    if (admitted.length === 0) return;
    const beats = await this.#o.connection.client.mget(admitted.map((kid) => this.#o.keys.heartbeatPrefix + kid));
    const now = Date.now();
    for (const [i, kid] of admitted.entries()) {
      const verdict = this.#verdicts.get(kid)!;
      const text = beats[i];
      if (text === null || text === undefined) continue;
      const beat = await readHeartbeat(text, verdict.jwk!, now);
      if ('refused' in beat) {
        if (verdict.refused !== beat.refused) this.#o.logger.warn({ kid, reason: beat.refused }, 'fleet: a peer heartbeat is refused');
        verdict.refused = beat.refused;
        continue;
      }
      delete verdict.refused;
      if (beat.at > verdict.lastBeat) verdict.lastBeat = beat.at;
    }
  }

  #setView(): void {
    const now = Date.now();
    const window = this.#o.ttlMs + this.#o.retentionMs;
    const peers = [...this.#verdicts.values()]
      .filter((v) => v.lastBeat > 0 && now - v.lastBeat < window)
      .map((v) => v.jwk)
      .filter((jwk): jwk is PublicJwk => jwk !== null);
    const all = [this.#own, ...peers].sort((a, b) => (a.kid < b.kid ? -1 : a.kid > b.kid ? 1 : 0));
    const view: Jwks = { keys: all.map((jwk) => ({ ...jwk })) };
    const text = JSON.stringify(view);
    if (text === this.#viewText) return;
    this.#view = view;
    this.#viewText = text;
    this.#o.logger.info({ keys: all.map((k) => k.kid) }, 'fleet: JWKS changed');
    for (const listener of this.#listeners) listener(view);
  }
}
