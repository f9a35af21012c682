/**
 * What token-length padding (docs/ehbp.md, "Padding") costs a sealed stream per event: the bytes it adds on the wire,
 * and the CPU of padding and sealing an event against sealing it bare, as Sigil's relay and `sealResponse` do it
 * (`padSseWrite`, then one `ResponseSealer.seal` per write). Events are chat chunks with tokens of 1 to 12 characters,
 * the shape vLLM streams them in; passes alternate which side goes first.
 *
 *   npx tsx bench/stream-padding.ts [--events 200000] [--rounds 5] [--bucket 256]
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { deriveResponseKeys, ResponseSealer } from '../src/ehbp/response-seal.ts';
import { padSseWrite } from '../src/protocol/sse-padding.ts';

const { values } = parseArgs({
  options: { events: { type: 'string', default: '200000' }, rounds: { type: 'string', default: '5' }, bucket: { type: 'string', default: '256' } },
});
const EVENTS = Number(values.events);
const ROUNDS = Number(values.rounds);
const BUCKET = Number(values.bucket);

const WORDS = ['a', 'the', ' of', ' token', ' length', 'Hello', ' world', ',', ' considerably', '.', ' enclave', ' 42', ' attestation', ' is'];
const event = (i: number) =>
  Buffer.from(
    `data: {"id":"chatcmpl-8f2c1a9e4b7d","object":"chat.completion.chunk","created":1764300000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":${JSON.stringify(WORDS[i % WORDS.length])}},"logprobs":null,"finish_reason":null}]}\n\n`,
  );
const events = Array.from({ length: WORDS.length }, (_, i) => event(i));

const sealer = () => new ResponseSealer(deriveResponseKeys(randomBytes(32), randomBytes(32), randomBytes(32)));

function pass(padded: boolean): { cpuUs: number; bytes: number } {
  const s = sealer();
  let bytes = 0;
  const start = process.cpuUsage();
  for (let i = 0; i < EVENTS; i++) {
    const plain = events[i % events.length]!;
    bytes += s.seal(padded ? padSseWrite(plain, BUCKET, 'after') : plain).length;
  }
  const used = process.cpuUsage(start);
  return { cpuUs: (used.user + used.system) / EVENTS, bytes: bytes / EVENTS };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
pass(false);
pass(true);
const bare: number[] = [];
const pad: number[] = [];
const bytes = { bare: 0, padded: 0 };
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? [false, true] : [true, false];
  for (const padded of order) {
    const r = pass(padded);
    (padded ? pad : bare).push(r.cpuUs);
    if (padded) bytes.padded = r.bytes;
    else bytes.bare = r.bytes;
  }
}
console.log(`events: ${events.map((e) => e.length).join(', ')} bytes (mean ${(events.reduce((n, e) => n + e.length, 0) / events.length).toFixed(1)})`);
console.log(
  `frame bytes per event: bare ${bytes.bare.toFixed(1)}, padded to ${BUCKET}: ${bytes.padded.toFixed(1)} (+${(bytes.padded - bytes.bare).toFixed(1)}, +${((bytes.padded / bytes.bare - 1) * 100).toFixed(0)}%)`,
);
console.log(
  `CPU per event (median of ${ROUNDS}): bare ${median(bare).toFixed(2)} us, padded ${median(pad).toFixed(2)} us (+${(median(pad) - median(bare)).toFixed(2)} us)`,
);
console.log(
  `load average: ${(await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
