import { Identity } from 'ehbp';
import { Agent, type Dispatcher } from 'undici';
import { pinnedAgent, SpkiPin } from '../verify/tls-pin.ts';
import type { Attested } from './attest.ts';

/** How long a verdict is trusted before the service is attested again, unless something sooner says so (docs/tls.md, "Re-attestation"). */
export const DEFAULT_REATTEST_EVERY_MS = 60 * 60 * 1000;

/** How long the current verdict holds, and whether its last renewal failed. */
export interface Renewal {
  /** When the current verdict was made. */
  attestedAt: Date;
  /** When it is renewed at the latest. */
  dueAt: Date;
  /** The last re-attestation's failure, while no later one succeeded: every request is refused with it meanwhile. */
  failed?: { at: Date; error: Error };
}

export interface SessionOptions {
  /** Fetches and verifies the attestation; rejects (an `AttestationError` naming the checks) when it does not verify. */
  verify: () => Promise<Attested>;
  /** The longest a verdict is trusted, in milliseconds. */
  reattestEveryMs: number;
  /** The clock verdicts age by; the real one unless a test brings its own. */
  now: () => Date;
  /** Extra CA certificates (PEM) for TLS that ends before the enclave. */
  ca?: string | undefined;
  /** The connections each verdict allows, when not TLS connections (an Oblivious HTTP relay sealing to the verdict's key). */
  connectionsFor?: ((attested: Attested) => Dispatcher) | undefined;
}

/** The connections a verdict allows: the caller's, else pinned to its TLS key when TLS ends in the enclave, else checked as the web checks them. */
function agentFor(attested: Attested, options: SessionOptions): Dispatcher {
  if (options.connectionsFor !== undefined) return options.connectionsFor(attested);
  const { ca } = options;
  return attested.tlsSpkiSha256 !== null ? pinnedAgent(new SpkiPin([attested.tlsSpkiSha256])) : new Agent(ca === undefined ? {} : { connect: { ca } });
}

/**
 * The attested client's state, in one object: the verdict every request is held to, the connections it allows (pinned to
 * its key only, so the pin set never grows), the HPKE identity bodies are sealed to, and when it must be renewed. A
 * re-attestation in flight is shared: requests wait on it. One that fails is kept and refuses every request until one succeeds.
 */
export class AttestedSession {
  #attested: Attested;
  #agent: Dispatcher;
  #identity: Promise<Identity> | undefined;
  #inFlight: Promise<Attested> | undefined;
  #failure: Error | undefined;
  #failedAt: Date | undefined;
  #dueAt: Date;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  private constructor(
    private readonly options: SessionOptions,
    attested: Attested,
  ) {
    this.#attested = attested;
    this.#agent = agentFor(attested, options);
    this.#dueAt = this.#dueAfter(attested);
    this.#schedule();
  }

  /** Attests the service once; a verdict that does not verify rejects, and nothing is kept. */
  static async start(options: SessionOptions): Promise<AttestedSession> {
    return new AttestedSession(options, await options.verify());
  }

  /** The verdict currently trusted (it may be due for renewal: requests go through `current`). */
  get attested(): Attested {
    return this.#attested;
  }

  /** The connections of the current verdict. */
  get agent(): Dispatcher {
    return this.#agent;
  }

  /** When the current verdict is renewed at the latest. */
  get dueAt(): Date {
    return this.#dueAt;
  }

  /** The verdict's age and renewal, and why the last re-attestation failed while none succeeded since. */
  get renewal(): Renewal {
    const renewal: Renewal = { attestedAt: this.#attested.at, dueAt: this.#dueAt };
    if (this.#failure !== undefined) renewal.failed = { at: this.#failedAt!, error: this.#failure };
    return renewal;
  }

  /**
   * The verdict a request may go out on: the one in flight if a re-attestation runs, a new one if the current has expired
   * or the last attempt failed (each request tries again); it rejects rather than hand back an expired or failed verdict.
   */
  async current(): Promise<Attested> {
    if (this.#inFlight !== undefined) return this.#inFlight;
    if (this.#failure !== undefined || this.options.now() >= this.#dueAt) return this.reattest();
    return this.#attested;
  }

  /** Attests the service again (one at a time: callers share the attempt in flight) and, verified, makes it the verdict. */
  reattest(): Promise<Attested> {
    this.#inFlight ??= this.options
      .verify()
      .then(
        (renewed) => {
          this.#adopt(renewed);
          return renewed;
        },
        (err: unknown) => {
          this.#failure = err instanceof Error ? err : new Error(String(err));
          this.#failedAt = this.options.now();
          throw err;
        },
      )
      .finally(() => (this.#inFlight = undefined));
    return this.#inFlight;
  }

  /** The HPKE identity bodies are sealed to, from the current verdict's key. */
  identity(): Promise<Identity> {
    const config = this.#attested.hpkeKeyConfig;
    if (config === null) throw new TypeError('the current verdict names no HPKE key');
    return (this.#identity ??= Identity.unmarshalPublicConfig(config));
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#agent.close();
  }

  #adopt(renewed: Attested): void {
    const previous = this.#attested;
    this.#attested = renewed;
    this.#failure = undefined;
    this.#failedAt = undefined;
    this.#identity = undefined;
    this.#dueAt = this.#dueAfter(renewed);
    if (renewed.tlsSpkiSha256 !== previous.tlsSpkiSha256 || this.options.connectionsFor !== undefined) {
      // Connections to the old key close once their requests end; only the new verdict's key is admitted from now on.
      const old = this.#agent;
      this.#agent = agentFor(renewed, this.options);
      void old.close();
    }
    this.#schedule();
  }

  #dueAfter(attested: Attested): Date {
    const every = new Date(attested.at.getTime() + this.options.reattestEveryMs);
    const expires = attested.expiresAt;
    return expires !== undefined && expires < every ? expires : every;
  }

  /** Renews the verdict when it falls due even if no request comes, so a change is seen and /status stays current. */
  #schedule(): void {
    clearTimeout(this.#timer);
    if (this.#closed) return;
    const delay = Math.max(0, this.#dueAt.getTime() - this.options.now().getTime());
    // A 32-bit timer fires at once past ~24.8 days: the wait is capped (re-attesting early is harmless).
    this.#timer = setTimeout(() => void this.reattest().catch(() => undefined), Math.min(delay, 2 ** 31 - 1));
    this.#timer.unref();
  }
}
