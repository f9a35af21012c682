/**
 * The load generator for everything wrk cannot see: stream time to first chunk, the time between
 * chunks, chunk count and order, and JSON latency at concurrency 1 with µs resolution. It runs as its
 * own process (forked by run.ts, talking over IPC) so it never shares an event loop with a proxy.
 */
import { Agent, request, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { summarize, type Summary } from './stats.ts';

export interface Target {
  host: string;
  port: number;
  path: string;
  headers: Record<string, string>;
  /** HTTPS (bench/tls.ts): the CA to trust (the bench's self-signed certificate) and the name it is for. */
  tls?: { ca: string; servername: string };
}

/** A keep-alive agent for the target's scheme; HTTPS connections check the bench certificate. */
function newAgent(target: Target, options: { keepAlive: boolean; maxSockets: number; maxFreeSockets?: number }): Agent {
  return target.tls === undefined ? new Agent(options) : new HttpsAgent({ ...options, ca: target.tls.ca, servername: target.tls.servername });
}

export interface LoadJob {
  kind: 'load';
  mode: 'json' | 'stream';
  target: Target;
  body: string;
  concurrency: number;
  durationMs: number;
  /** Content chunks the engine sends per stream (the request's max_tokens). */
  tokens: number;
}

/** Opens `streams` streams at once and holds them until the engine ends them (the memory test). */
export interface HoldJob {
  kind: 'hold';
  target: Target;
  body: string;
  streams: number;
  tokens: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  non200: number;
  seconds: number;
  rps: number;
  /** µs: whole response (JSON) or time to the first body chunk (stream). */
  latency: Summary;
  /** µs between consecutive data events of a stream (stream only). */
  gaps?: Summary;
  streamsOk?: number;
  streamsBad?: number;
  /** Reads that carried more than one token event: a chunk held back and merged with the next. */
  mergedReads?: number;
  reads?: number;
  firstProblem?: string;
}

export type WorkerMessage = { type: 'opened'; streams: number } | { type: 'result'; result: LoadResult } | { type: 'error'; message: string };

const nowUs = () => performance.now() * 1000;
const CONTENT = /"content":"t(\d+) "/;

interface StreamCheck {
  ok: boolean;
  problem?: string;
}

/** Tracks one stream's events: role, t1..tN in order, finish, [DONE]; anything else is a problem. */
export class StreamReader {
  #pending = '';
  #expect = 0; // 0: role, 1..N: content k, N+1: finish, N+2: [DONE], N+3: done
  #problem: string | undefined;
  #last = 0;
  constructor(
    private readonly tokens: number,
    private readonly gaps: number[],
    private readonly onMerged: () => void,
  ) {}

  read(text: string, at: number): void {
    this.#pending += text;
    let contentEvents = 0;
    let cut: number;
    while ((cut = this.#pending.indexOf('\n\n')) !== -1) {
      const raw = this.#pending.slice(0, cut);
      this.#pending = this.#pending.slice(cut + 2);
      // Comment lines (Sigil's `: receipt <JWS>`, a sealed stream's padding, which precedes the next event's data) are no event.
      const event = raw.startsWith(':')
        ? raw
            .split('\n')
            .filter((line) => !line.startsWith(':'))
            .join('\n')
        : raw;
      if (event === '') continue;
      if (this.#problem !== undefined) continue;
      if (event === 'data: [DONE]') {
        if (this.#expect !== this.tokens + 2) this.#problem = `[DONE] at position ${this.#expect}`;
        this.#expect++;
        continue;
      }
      if (this.#expect === 0) {
        if (!event.includes('"role":"assistant"')) this.#problem = 'first event is not the role chunk';
      } else if (this.#expect <= this.tokens) {
        const m = CONTENT.exec(event);
        if (m === null || Number(m[1]) !== this.#expect) this.#problem = `expected t${this.#expect}, got ${event.slice(0, 160)}`;
        contentEvents++;
        this.gaps.push(at - this.#last);
      } else if (this.#expect === this.tokens + 1) {
        if (!event.includes('"finish_reason":"stop"')) this.#problem = 'missing finish chunk';
      } else {
        if (!event.startsWith('data: {') || !event.includes('"usage"')) this.#problem = `unexpected event after [DONE]: ${event.slice(0, 80)}`;
        continue;
      }
      this.#last = at;
      this.#expect++;
    }
    if (contentEvents > 1) this.onMerged();
  }

  finish(): StreamCheck {
    if (this.#problem === undefined && this.#expect !== this.tokens + 3) this.#problem = `stream ended after ${this.#expect} of ${this.tokens + 3} events`;
    return this.#problem === undefined ? { ok: true } : { ok: false, problem: this.#problem };
  }
}

interface Tally {
  latencies: number[];
  gaps: number[];
  errors: number;
  non200: number;
  ok: number;
  bad: number;
  merged: number;
  reads: number;
  firstProblem?: string;
}

function once(
  job: { mode: 'json' | 'stream'; target: Target; body: string; tokens: number },
  agent: Agent,
  tally: Tally,
  onFirstByte?: () => void,
): Promise<void> {
  return new Promise((resolve) => {
    const start = nowUs();
    const send = job.target.tls === undefined ? request : httpsRequest;
    const req = send(
      { host: job.target.host, port: job.target.port, path: job.target.path, method: 'POST', headers: job.target.headers, agent },
      (res: IncomingMessage) => {
        if (res.statusCode !== 200) {
          tally.non200++;
          if (tally.firstProblem === undefined) tally.firstProblem = `status ${res.statusCode}`;
          res.resume();
          res.on('end', () => resolve());
          res.on('error', () => resolve());
          return;
        }
        if (job.mode === 'json') {
          res.on('data', () => {});
          res.on('end', () => {
            tally.latencies.push(nowUs() - start);
            resolve();
          });
          res.on('error', () => {
            tally.errors++;
            resolve();
          });
          return;
        }
        const reader = new StreamReader(job.tokens, tally.gaps, () => tally.merged++);
        let first = true;
        res.setEncoding('latin1');
        res.on('data', (text: string) => {
          const at = nowUs();
          tally.reads++;
          if (first) {
            first = false;
            tally.latencies.push(at - start);
            onFirstByte?.();
          }
          reader.read(text, at);
        });
        res.on('end', () => {
          const check = reader.finish();
          if (check.ok) tally.ok++;
          else {
            tally.bad++;
            if (tally.firstProblem === undefined) tally.firstProblem = check.problem;
          }
          resolve();
        });
        res.on('error', () => {
          tally.errors++;
          resolve();
        });
      },
    );
    req.on('error', (err) => {
      tally.errors++;
      if (tally.firstProblem === undefined) tally.firstProblem = err.message;
      setTimeout(resolve, 5);
    });
    req.end(job.body);
  });
}

function newTally(): Tally {
  return { latencies: [], gaps: [], errors: 0, non200: 0, ok: 0, bad: 0, merged: 0, reads: 0 };
}

function toResult(job: { mode: 'json' | 'stream' }, tally: Tally, seconds: number): LoadResult {
  const requests = tally.latencies.length;
  const result: LoadResult = { requests, errors: tally.errors, non200: tally.non200, seconds, rps: requests / seconds, latency: summarize(tally.latencies) };
  if (job.mode === 'stream') {
    result.gaps = summarize(tally.gaps);
    result.streamsOk = tally.ok;
    result.streamsBad = tally.bad;
    result.mergedReads = tally.merged;
    result.reads = tally.reads;
  }
  if (tally.firstProblem !== undefined) result.firstProblem = tally.firstProblem;
  return result;
}

export async function runLoad(job: LoadJob): Promise<LoadResult> {
  const agent = newAgent(job.target, { keepAlive: true, maxSockets: job.concurrency, maxFreeSockets: job.concurrency });
  const tally = newTally();
  const started = performance.now();
  const deadline = started + job.durationMs;
  const user = async () => {
    while (performance.now() < deadline) await once(job, agent, tally);
  };
  await Promise.all(Array.from({ length: job.concurrency }, user));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return toResult(job, tally, seconds);
}

export async function runHold(job: HoldJob, opened: (n: number) => void): Promise<LoadResult> {
  const agent = newAgent(job.target, { keepAlive: false, maxSockets: Infinity });
  const tally = newTally();
  let firstBytes = 0;
  const started = performance.now();
  const all = Array.from({ length: job.streams }, () =>
    once({ mode: 'stream', target: job.target, body: job.body, tokens: job.tokens }, agent, tally, () => {
      if (++firstBytes === job.streams) opened(firstBytes);
    }),
  );
  await Promise.all(all);
  if (firstBytes < job.streams) opened(firstBytes);
  agent.destroy();
  return toResult({ mode: 'stream' }, tally, (performance.now() - started) / 1000);
}

if (process.send !== undefined) {
  const send = (m: WorkerMessage) => process.send!(m);
  process.on('message', (job: LoadJob | HoldJob) => {
    const done = job.kind === 'load' ? runLoad(job) : runHold(job, (streams) => send({ type: 'opened', streams }));
    done.then(
      (result) => send({ type: 'result', result }),
      (err: Error) => send({ type: 'error', message: err.message }),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
