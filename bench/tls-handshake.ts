/**
 * The handshake load for bench/tls.ts: full TLS handshakes, nothing else. Each of `concurrency` loops
 * opens a new TCP connection, completes a TLS handshake (never offering a session, so there is no
 * resumption; checked with `isSessionReused()`), closes it, and starts the next. It runs as its own
 * process (forked by bench/tls.ts over IPC, pinned to the load core) so it never shares an event loop
 * with a proxy.
 */
import { connect } from 'node:tls';
import { summarize, type Summary } from './stats.ts';

export interface HandshakeJob {
  kind: 'handshake';
  host: string;
  port: number;
  ca: string;
  servername: string;
  concurrency: number;
  durationMs: number;
}

export interface HandshakeResult {
  handshakes: number;
  errors: number;
  /** Handshakes the server resumed from a session: must be 0 for a full-handshake count. */
  resumed: number;
  seconds: number;
  rate: number;
  /** µs from connect() to the handshake's end. */
  latency: Summary;
  protocol?: string;
  cipher?: string;
  group?: string;
  firstProblem?: string;
}

export type HandshakeMessage = { type: 'result'; result: HandshakeResult } | { type: 'error'; message: string };

interface Tally {
  latencies: number[];
  errors: number;
  resumed: number;
  protocol?: string;
  cipher?: string;
  group?: string;
  firstProblem?: string;
}

function handshakeOnce(job: HandshakeJob, tally: Tally): Promise<void> {
  return new Promise((resolve) => {
    const start = performance.now();
    // The chain is checked on the first handshake of a job only: the handshake's own signature is always
    // checked by TLS, and skipping the chain afterwards keeps the client's cost (on the load core) low.
    const verify = tally.latencies.length === 0 && tally.errors === 0;
    const socket = connect({ host: job.host, port: job.port, ca: job.ca, servername: job.servername, ALPNProtocols: ['http/1.1'], rejectUnauthorized: verify });
    let done = false;
    let secured = false;
    const finish = () => {
      if (done) return;
      done = true;
      resolve();
    };
    socket.once('secureConnect', () => {
      secured = true;
      tally.latencies.push((performance.now() - start) * 1000);
      if (socket.isSessionReused()) tally.resumed++;
      if (tally.protocol === undefined) {
        tally.protocol = socket.getProtocol() ?? undefined;
        tally.cipher = socket.getCipher().standardName;
        const info = socket.getEphemeralKeyInfo();
        if (info !== null && 'name' in info && typeof info.name === 'string') tally.group = info.name;
      }
      socket.end();
    });
    socket.once('error', (err) => {
      // After the handshake, a reset while closing is not a failed handshake.
      if (!secured) {
        tally.errors++;
        tally.firstProblem ??= err.message;
      }
      socket.destroy();
      finish();
    });
    socket.once('close', finish);
    socket.resume();
  });
}

export async function runHandshakes(job: HandshakeJob): Promise<HandshakeResult> {
  const tally: Tally = { latencies: [], errors: 0, resumed: 0 };
  const started = performance.now();
  const deadline = started + job.durationMs;
  const loop = async () => {
    while (performance.now() < deadline) await handshakeOnce(job, tally);
  };
  await Promise.all(Array.from({ length: job.concurrency }, loop));
  const seconds = (performance.now() - started) / 1000;
  const result: HandshakeResult = {
    handshakes: tally.latencies.length,
    errors: tally.errors,
    resumed: tally.resumed,
    seconds,
    rate: tally.latencies.length / seconds,
    latency: summarize(tally.latencies),
  };
  if (tally.protocol !== undefined) result.protocol = tally.protocol;
  if (tally.cipher !== undefined) result.cipher = tally.cipher;
  if (tally.group !== undefined) result.group = tally.group;
  if (tally.firstProblem !== undefined) result.firstProblem = tally.firstProblem;
  return result;
}

if (process.send !== undefined) {
  const send = (m: HandshakeMessage) => process.send!(m);
  process.on('message', (job: HandshakeJob) => {
    runHandshakes(job).then(
      (result) => send({ type: 'result', result }),
      (err: Error) => send({ type: 'error', message: err.message }),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
