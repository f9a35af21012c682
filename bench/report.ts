/** Turns the raw samples of one run into the tables (markdown and JSON) that the README quotes. */
import { PEER_LABELS, type PeerName } from './peers.ts';
import type { ReceiptCost } from './receipt-cost.ts';
import { spread, type Spread } from './stats.ts';

export type Scenario = 'json-c1' | 'stream-c1' | 'json-c50' | 'stream-c50';

export interface Sample {
  rep: number;
  peer: PeerName;
  scenario: Scenario;
  requests: number;
  errors: number;
  /** µs: whole response for JSON, time to first chunk for streams. */
  p50: number;
  p99: number;
  rps: number;
  tool: string;
  /** µs of proxy CPU (user + system) per request. */
  cpuUsPerRequest?: number;
  gapP50?: number;
  gapP99?: number;
  streamsOk?: number;
  streamsBad?: number;
  mergedReads?: number;
  reads?: number;
  problem?: string;
}

export interface MemorySample {
  peer: PeerName;
  streams: number;
  opened: number;
  streamsOk: number;
  baselineMb: number;
  peakMb: number;
  /** RSS 5 s after the streams closed. */
  afterMb: number;
  /** RSS `lateS` seconds after they closed. */
  lateMb?: number;
  lateS?: number;
  problem?: string;
}

export interface Meta {
  date: string;
  mode: string;
  reps: number;
  machine: string;
  node: string;
  tools: Record<string, string>;
  commit: string;
  engine: { chunkMs: number; jsonMs: number; streamTokensC1: number; streamTokensC50: number; jsonTokens: number };
  durations: Record<string, number>;
  pinning: string;
  loadGenerators: string;
  seconds?: number;
  /** 1-minute load average of the machine before and after: other processes share these cores. */
  loadAverage?: { before: number; after: number };
}

export interface Unavailable {
  name: PeerName;
  note: string;
}

export interface TargetCheck {
  target: string;
  measured: string;
  holds: boolean | null;
}

export interface Report {
  meta: Meta;
  unavailable: Unavailable[];
  peers: PeerName[];
  summary: Record<string, Record<string, Spread>>;
  memory: MemorySample[];
  receiptCost: ReceiptCost & { endToEndUs?: Spread };
  targets: TargetCheck[];
  samples: Sample[];
}

type Field = 'p50' | 'p99' | 'rps' | 'cpuUsPerRequest' | 'gapP50' | 'gapP99';

function values(samples: Sample[], peer: PeerName, scenario: Scenario, field: Field): number[] {
  return samples.filter((s) => s.peer === peer && s.scenario === scenario).map((s) => s[field] ?? Number.NaN);
}

/** The peer's value minus another peer's (the engine's, usually) in the same repetition. */
function deltas(samples: Sample[], peer: PeerName, base: PeerName, scenario: Scenario, field: Field): number[] {
  const reps = [...new Set(samples.map((s) => s.rep))];
  return reps.map((rep) => {
    const a = samples.find((s) => s.rep === rep && s.peer === peer && s.scenario === scenario)?.[field];
    const b = samples.find((s) => s.rep === rep && s.peer === base && s.scenario === scenario)?.[field];
    return a === undefined || b === undefined ? Number.NaN : a - b;
  });
}

function ratios(samples: Sample[], peer: PeerName, base: PeerName, scenario: Scenario, field: Field): number[] {
  const reps = [...new Set(samples.map((s) => s.rep))];
  return reps.map((rep) => {
    const a = samples.find((s) => s.rep === rep && s.peer === peer && s.scenario === scenario)?.[field];
    const b = samples.find((s) => s.rep === rep && s.peer === base && s.scenario === scenario)?.[field];
    return a === undefined || b === undefined || b === 0 ? Number.NaN : a / b;
  });
}

const SCENARIOS: Scenario[] = ['json-c1', 'stream-c1', 'json-c50', 'stream-c50'];

export function buildReport(
  meta: Meta,
  peers: PeerName[],
  unavailable: Unavailable[],
  samples: Sample[],
  memory: MemorySample[],
  receiptCost: ReceiptCost,
): Report {
  const summary: Report['summary'] = {};
  const hasDirect = peers.includes('direct');
  for (const peer of peers) {
    const m: Record<string, Spread> = {};
    for (const sc of SCENARIOS) {
      m[`${sc}.p50`] = spread(values(samples, peer, sc, 'p50'));
      m[`${sc}.p99`] = spread(values(samples, peer, sc, 'p99'));
      m[`${sc}.rps`] = spread(values(samples, peer, sc, 'rps'));
      if (hasDirect && peer !== 'direct') {
        m[`${sc}.p50.added`] = spread(deltas(samples, peer, 'direct', sc, 'p50'));
        m[`${sc}.p99.added`] = spread(deltas(samples, peer, 'direct', sc, 'p99'));
      }
    }
    for (const sc of SCENARIOS) m[`${sc}.cpuUsPerRequest`] = spread(values(samples, peer, sc, 'cpuUsPerRequest'));
    for (const sc of ['stream-c1', 'stream-c50'] as const) {
      m[`${sc}.gapP50`] = spread(values(samples, peer, sc, 'gapP50'));
      m[`${sc}.gapP99`] = spread(values(samples, peer, sc, 'gapP99'));
      if (hasDirect && peer !== 'direct') {
        m[`${sc}.gapP50.added`] = spread(deltas(samples, peer, 'direct', sc, 'gapP50'));
        m[`${sc}.gapP99.added`] = spread(deltas(samples, peer, 'direct', sc, 'gapP99'));
      }
    }
    if (peers.includes('node-http')) m['json-c50.rps.vsNodeHttp'] = spread(ratios(samples, peer, 'node-http', 'json-c50', 'rps'));
    summary[peer] = m;
  }
  const cost: Report['receiptCost'] = { ...receiptCost };
  if (peers.includes('sigil') && peers.includes('sigil-receipts'))
    cost.endToEndUs = spread(deltas(samples, 'sigil-receipts', 'sigil', 'json-c50', 'cpuUsPerRequest'));
  const report: Report = { meta, unavailable, peers, summary, memory, receiptCost: cost, targets: [], samples };
  report.targets = checkTargets(report);
  return report;
}

const fmt = (v: number, digits = 0) => (Number.isFinite(v) ? v.toFixed(digits) : 'n/a');
const cell = (s: Spread | undefined, digits = 0) =>
  s === undefined || !Number.isFinite(s.median) ? 'n/a' : `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`;
const med = (s: Spread | undefined) => s?.median ?? Number.NaN;

function streamIntegrity(samples: Sample[], peer: PeerName): { ok: number; bad: number; merged: number; reads: number; problem?: string } {
  const own = samples.filter((s) => s.peer === peer && s.scenario.startsWith('stream'));
  const out: { ok: number; bad: number; merged: number; reads: number; problem?: string } = { ok: 0, bad: 0, merged: 0, reads: 0 };
  for (const s of own) {
    out.ok += s.streamsOk ?? 0;
    out.bad += (s.streamsBad ?? 0) + s.errors;
    out.merged += s.mergedReads ?? 0;
    out.reads += s.reads ?? 0;
    if (out.problem === undefined && s.problem !== undefined) out.problem = s.problem;
  }
  return out;
}

function checkTargets(r: Report): TargetCheck[] {
  const out: TargetCheck[] = [];
  const s = r.summary.sigil;
  const sr = r.summary['sigil-receipts'];
  if (s === undefined) return out;
  const le = (v: number, limit: number) => (Number.isFinite(v) ? v <= limit : null);
  const ge = (v: number, limit: number) => (Number.isFinite(v) ? v >= limit : null);
  for (const [label, key] of [
    ['JSON', 'json-c1'],
    ['stream TTFB', 'stream-c1'],
  ] as const) {
    const p50 = med(s[`${key}.p50.added`]);
    const p99 = med(s[`${key}.p99.added`]);
    out.push({
      target: `added latency c=1, ${label}: p50 ≤ 300 µs`,
      measured: `${fmt(p50)} µs (with receipts ${fmt(med(sr?.[`${key}.p50.added`]))} µs)`,
      holds: le(p50, 300),
    });
    out.push({
      target: `added latency c=1, ${label}: p99 ≤ 1000 µs (the median over repetitions of the peer's p99 minus the engine's)`,
      measured: `${fmt(p99)} µs (with receipts ${fmt(med(sr?.[`${key}.p99.added`]))} µs)`,
      holds: le(p99, 1000),
    });
  }
  const t = med(s['json-c50.rps.vsNodeHttp']);
  out.push({ target: 'throughput without receipts ≥ 0.90× minimal node:http', measured: `${fmt(t, 2)}×`, holds: ge(t, 0.9) });
  const tr = med(sr?.['json-c50.rps.vsNodeHttp']);
  out.push({ target: 'throughput with a receipt on every request ≥ 0.75× minimal node:http', measured: `${fmt(tr, 2)}×`, holds: ge(tr, 0.75) });
  for (const peer of ['sigil', 'sigil-receipts'] as const) {
    if (!r.peers.includes(peer)) continue;
    const integ = streamIntegrity(r.samples, peer);
    out.push({
      target: `streams (${PEER_LABELS[peer]}): every chunk, in order, none held back`,
      measured:
        `${integ.ok} streams complete and in order, ${integ.bad} bad; ${integ.merged} of ${integ.reads} reads carried >1 token event` +
        (integ.problem ? `; first problem: ${integ.problem}` : ''),
      holds: integ.ok > 0 && integ.bad === 0 && integ.merged <= Math.max(1, streamIntegrity(r.samples, 'direct').merged * 2),
    });
  }
  const ttfb1 = med(s['stream-c1.p50.added']);
  const ttfb50 = med(s['stream-c50.p50.added']);
  out.push({
    target: 'added time to first chunk p50 ≤ 1 ms (c=1 and c=50)',
    measured: `c=1 ${fmt(ttfb1)} µs, c=50 ${fmt(ttfb50)} µs`,
    holds: le(Math.max(ttfb1, ttfb50), 1000),
  });
  for (const m of r.memory.filter((x) => x.peer === 'sigil' || x.peer === 'sigil-receipts')) {
    const per1000 = ((m.peakMb - m.baselineMb) * 1000) / Math.max(1, m.opened);
    out.push({
      target: `memory (${PEER_LABELS[m.peer]}): ≤ 40 MB per 1,000 concurrent streams`,
      measured: `${fmt(per1000, 1)} MB (${m.opened} open)`,
      holds: m.opened === m.streams ? per1000 <= 40 : null,
    });
    const late = m.lateMb ?? m.afterMb;
    const back = late / m.baselineMb;
    out.push({
      target: `memory (${PEER_LABELS[m.peer]}): back within 10% of baseline after close`,
      measured: `${fmt(late, 1)} MB ${m.lateS ?? 5} s after close vs ${fmt(m.baselineMb, 1)} MB baseline (${fmt((back - 1) * 100, 1)}%; ${fmt(m.afterMb, 1)} MB after 5 s)`,
      holds: back <= 1.1,
    });
  }
  const p = r.summary.portkey;
  if (p !== undefined) {
    const lower: Array<[string, string]> = [];
    for (const sc of SCENARIOS) lower.push([`${sc} p50`, `${sc}.p50`], [`${sc} p99`, `${sc}.p99`]);
    lower.push(['CPU per request', 'json-c50.cpuUsPerRequest'], ['inter-chunk p50 (c=50)', 'stream-c50.gapP50']);
    const lost: string[] = [];
    let compared = 0;
    for (const [label, key] of lower) {
      const a = med(s[key]);
      const b = med(p[key]);
      if (!Number.isFinite(a) || !Number.isFinite(b)) continue;
      compared++;
      if (a >= b) lost.push(label);
    }
    const rpsS = med(s['json-c50.rps']);
    const rpsP = med(p['json-c50.rps']);
    if (Number.isFinite(rpsS) && Number.isFinite(rpsP)) {
      compared++;
      if (rpsS <= rpsP) lost.push('throughput');
    }
    const mp = r.memory.find((x) => x.peer === 'portkey');
    const ms = r.memory.find((x) => x.peer === 'sigil');
    if (mp && ms) {
      compared++;
      if (ms.peakMb - ms.baselineMb >= mp.peakMb - mp.baselineMb) lost.push('memory per stream');
    }
    out.push({
      target: 'beat Portkey on every metric where both run (Sigil without receipts)',
      measured: `${compared - lost.length} of ${compared} metrics better` + (lost.length ? `; not on: ${lost.join(', ')}` : ''),
      holds: compared > 0 ? lost.length === 0 : null,
    });
  }
  return out;
}

export function renderMarkdown(r: Report): string {
  const L: string[] = [];
  const m = r.meta;
  L.push(
    `Run ${m.date} on ${m.machine}; Node ${m.node}; ${Object.entries(m.tools)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}; Sigil at ${m.commit}.`,
  );
  L.push(
    `Mode \`${m.mode}\`, ${m.reps} interleaved repetitions; each cell is the median over repetitions with (min–max). ${m.pinning}` +
      (m.loadAverage
        ? ` Machine load average (other work on the same cores): ${m.loadAverage.before.toFixed(1)} before, ${m.loadAverage.after.toFixed(1)} after.`
        : ''),
  );
  L.push(
    `Fake engine (vLLM byte format): JSON answer after ${m.engine.jsonMs} ms; streams send one event every ${m.engine.chunkMs} ms (${m.engine.streamTokensC1} tokens per stream at c=1, ${m.engine.streamTokensC50} at c=50). Load: ${m.loadGenerators}.`,
  );
  if (r.unavailable.length > 0) {
    L.push('');
    for (const u of r.unavailable) L.push(`- **${PEER_LABELS[u.name]}:** ${r.peers.includes(u.name) ? u.note : `not measured. ${u.note}`}`);
  }
  L.push('');
  L.push(
    "**Latency** (µs; JSON: whole response; stream: time to first chunk): p50 as added over the engine (the peer's p50 minus the engine's in the same repetition), p99 as measured. An added p99 would be the difference of two tails sampled at different moments, noisy enough to fall below the added p50 or under zero; the engine row is absolute throughout.",
  );
  L.push('');
  L.push(
    '| peer | JSON c=1 p50 added | JSON c=1 p99 | stream TTFB c=1 p50 added | stream TTFB c=1 p99 | JSON c=50 p50 added | JSON c=50 p99 | stream TTFB c=50 p50 added | stream TTFB c=50 p99 |',
  );
  L.push('|---|---|---|---|---|---|---|---|---|');
  for (const peer of r.peers) {
    const s = r.summary[peer]!;
    const k = (sc: Scenario, q: 'p50' | 'p99') => cell(peer === 'direct' || q === 'p99' ? s[`${sc}.${q}`] : s[`${sc}.${q}.added`]);
    const name = peer === 'direct' ? `${PEER_LABELS[peer]} (absolute)` : PEER_LABELS[peer];
    L.push(
      `| ${name} | ${k('json-c1', 'p50')} | ${k('json-c1', 'p99')} | ${k('stream-c1', 'p50')} | ${k('stream-c1', 'p99')} | ${k('json-c50', 'p50')} | ${k('json-c50', 'p99')} | ${k('stream-c50', 'p50')} | ${k('stream-c50', 'p99')} |`,
    );
  }
  L.push('');
  L.push('**Throughput, CPU and streaming** (JSON at c=50 saturates the proxy core; inter-chunk time added is over the engine directly, at c=50)');
  L.push('');
  L.push(
    '| peer | req/s (JSON, c=50) | × minimal node:http | proxy CPU µs/request (JSON c=50) | CPU µs/request (JSON c=1) | CPU µs/stream (c=50, 19 events) | inter-chunk added p50 µs | inter-chunk added p99 µs | streams complete, in order | reads with >1 token event |',
  );
  L.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const peer of r.peers) {
    const s = r.summary[peer]!;
    const integ = streamIntegrity(r.samples, peer);
    const gap = (q: 'gapP50' | 'gapP99') => (peer === 'direct' ? `${cell(s[`stream-c50.${q}`])} (absolute)` : cell(s[`stream-c50.${q}.added`]));
    L.push(
      `| ${PEER_LABELS[peer]} | ${cell(s['json-c50.rps'])} | ${cell(s['json-c50.rps.vsNodeHttp'], 2)} | ${peer === 'direct' ? '—' : cell(s['json-c50.cpuUsPerRequest'])} | ${peer === 'direct' ? '—' : cell(s['json-c1.cpuUsPerRequest'])} | ${peer === 'direct' ? '—' : cell(s['stream-c50.cpuUsPerRequest'])} | ${gap('gapP50')} | ${gap('gapP99')} | ${integ.ok} of ${integ.ok + integ.bad} | ${integ.merged} of ${integ.reads} |`,
    );
  }
  if (r.memory.length > 0) {
    L.push('');
    L.push(`**Memory** (RSS of the proxy process(es), MB, with ${r.memory[0]!.streams} concurrent open streams and after they close)`);
    L.push('');
    const lateS = r.memory[0]!.lateS ?? 5;
    L.push(`| peer | baseline | with the streams open | added per 1,000 streams | 5 s after close | ${lateS} s after close | after / baseline (${lateS} s) |`);
    L.push('|---|---|---|---|---|---|---|');
    for (const x of r.memory) {
      const per1000 = ((x.peakMb - x.baselineMb) * 1000) / Math.max(1, x.opened);
      const late = x.lateMb ?? x.afterMb;
      L.push(
        `| ${PEER_LABELS[x.peer]} | ${fmt(x.baselineMb, 1)} | ${fmt(x.peakMb, 1)} (${x.opened} open) | ${fmt(per1000, 1)} | ${fmt(x.afterMb, 1)} | ${fmt(late, 1)} | ${fmt(late / x.baselineMb, 2)} |`,
      );
    }
  }
  const c = r.receiptCost;
  L.push('');
  L.push(
    `**Receipt cost** (µs of CPU per request, in-process over ${c.iterations} iterations): one bare ES256 signature through node:crypto ${fmt(c.bareSignUs, 1)}; Sigil's receipt signer (on the calling thread, as the bench's one-core Sigils sign) ${fmt(c.signUs, 1)}, request + response SHA-256 ${fmt(c.hashUs, 1)}; all a JSON receipt adds ${fmt(c.jsonReceiptUs, 1)}; a stream's two receipts ${fmt(c.streamReceiptUs, 1)}.` +
      (c.endToEndUs
        ? ` End to end (Sigil's CPU per request with minus without receipts, JSON c=50): ${cell(c.endToEndUs)} µs, ${fmt(c.endToEndUs.median / c.bareSignUs, 2)}× one bare signature (target ≤ 2×).`
        : ''),
  );
  if (r.targets.length > 0) {
    L.push('');
    L.push('**Targets** (medians over the repetitions)');
    L.push('');
    L.push('| target | measured | holds |');
    L.push('|---|---|---|');
    for (const t of r.targets) L.push(`| ${t.target} | ${t.measured} | ${t.holds === null ? 'not measured' : t.holds ? 'yes' : '**no**'} |`);
  }
  return L.join('\n') + '\n';
}
