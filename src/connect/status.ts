import { AttestationError, type Attested, type InclusionVerdict, type ReceiptResult, type Renewal } from '../client/index.ts';
import { checkMark, type Check } from '../verify/check.ts';
import { describeCheck } from '../verify/check-registry.ts';
import { HEADLINE_WORDS, headlineOf, type Headline } from '../verify/headline.ts';

const RESULT_WORD = { PASS: 'PASS', FAIL: 'FAIL', '----': 'NOT PINNED', WAIVED: 'WAIVED' } as const;
const KEPT = 100;

export interface StatusCheck {
  name: string;
  result: (typeof RESULT_WORD)[keyof typeof RESULT_WORD];
  title: string;
  explains: string;
  detail: string;
  waived?: string;
}

export interface SeenReceipt {
  at: string;
  path: string;
  stream: boolean;
  ok: boolean;
  receipt_id?: string;
  model?: string;
  /** The checks that failed (waived ones are not failures). */
  failed: string[];
  problem?: string;
  /** Whether the service's transparency log holds the answer's receipts (docs/log.md); absent when it keeps no log or the receipt failed. */
  log?: 'pending' | 'included' | 'NOT included';
  log_index?: number;
  /** Why the log check failed, in plain words (ids, indexes and checkpoint sizes only). */
  log_problem?: string;
}

/** `GET /status` (docs/connect.md): the verdict in the trust page's words, each check, and the receipts seen. */
export interface ConnectStatus {
  service: string;
  verdict: { headline: Headline; text: string; detail: string; outcome: string; summary: string };
  attested_at: string;
  tee: string;
  measurement: string;
  bodies: 'sealed (EHBP)' | 'sealed (Oblivious HTTP)' | 'not sealed';
  /** The Oblivious HTTP relay every request goes through (`--ohttp-relay`), or "none", and what that means for who sees your address. */
  relay: { url: string; meaning: string };
  tls:
    | 'pinned to the attested key'
    | 'not ending in the enclave (bodies sealed instead)'
    | 'plain HTTP'
    | 'not used: the relay carries every request, sealed to the attested key';
  checks: StatusCheck[];
  receipts: { verified: number; failed: number; recent: SeenReceipt[] };
  /** How old the verdict is and when it is renewed; while a re-attestation failed, every answer is refused with why. */
  renewal: { verdict_age_seconds: number; next_reattestation: string; failed?: { at: string; check: string | null; detail: string } };
  /** What the hardware reports' freshness rests on, in plain words. */
  freshness: string;
  /** The inclusion checks of the receipts seen, when the attestation binds a transparency log (`kept_by_service`). */
  log: { kept_by_service: boolean; included: number; not_included: number; pending: number };
  /** Present once connect stopped passing answers on, and why: the service's log was proven not to hold a receipt, or to fork. */
  stopped?: string;
}

function statusCheck(c: Check): StatusCheck {
  const declared = describeCheck(c.name);
  const out: StatusCheck = {
    name: c.name,
    result: RESULT_WORD[checkMark(c)],
    title: declared?.title ?? c.name,
    explains: declared?.explains ?? '',
    detail: c.detail,
  };
  if (c.waived !== undefined) out.waived = c.waived;
  return out;
}

/** The receipts connect saw, newest last, with counts since it started. */
export class ReceiptBook {
  verified = 0;
  failed = 0;
  included = 0;
  notIncluded = 0;
  pendingLog = 0;
  /** Why connect stopped passing answers on: the log was proven not to hold a receipt, or to fork. */
  halted: string | undefined;
  readonly recent: SeenReceipt[] = [];
  private readonly seenOf = new WeakMap<ReceiptResult, SeenReceipt>();

  /** A receipt's inclusion verdict, once its batch was integrated (or the check gave up). */
  settle(result: ReceiptResult, verdict: InclusionVerdict): void {
    const seen = this.seenOf.get(result);
    if (seen?.log === 'pending') this.pendingLog--;
    if (verdict.ok) this.included++;
    else this.notIncluded++;
    if (seen === undefined) return;
    seen.log = verdict.ok ? 'included' : 'NOT included';
    if (verdict.index !== undefined) seen.log_index = verdict.index;
    if (!verdict.ok) seen.log_problem = verdict.detail;
  }

  add(result: ReceiptResult): void {
    if (result.ok) this.verified++;
    else this.failed++;
    const seen: SeenReceipt = {
      at: new Date().toISOString(),
      path: result.path,
      stream: result.stream,
      ok: result.ok,
      failed: result.checks.filter((c) => !c.ok && c.waived === undefined).map((c) => c.name),
    };
    if (result.claims !== undefined) {
      seen.receipt_id = result.claims.receipt_id;
      seen.model = result.claims.selected_model.model_id;
    }
    if (result.problem !== undefined) seen.problem = result.problem;
    if (result.inclusion !== undefined) {
      seen.log = 'pending';
      this.pendingLog++;
      this.seenOf.set(result, seen);
    }
    this.recent.push(seen);
    if (this.recent.length > KEPT) this.recent.shift();
  }
}

/** What freshness rests on, said so a person can weigh it (docs/connect.md, "Fresh evidence"). */
export function freshnessWords(attested: Attested): string {
  if (attested.tee === 'none') return 'no hardware report: nothing vouches for freshness (a development service)';
  return attested.freshness === 'fresh report'
    ? "fresh: the CPU report and every GPU report answer connect's own nonce, at start and at each re-attestation"
    : "the CPU and GPU reports are the service's start evidence, reused: connect's nonce is signed by the receipt key that evidence binds, so GPU freshness rests on the start evidence (--fresh-report asks for new reports)";
}

function renewalOf(renewal: Renewal, now: Date): ConnectStatus['renewal'] {
  const out: ConnectStatus['renewal'] = {
    verdict_age_seconds: Math.max(0, Math.floor((now.getTime() - renewal.attestedAt.getTime()) / 1000)),
    next_reattestation: renewal.dueAt.toISOString(),
  };
  if (renewal.failed !== undefined) {
    const { error, at } = renewal.failed;
    const check = error instanceof AttestationError ? (error.checks.find((c) => !c.ok && c.waived === undefined)?.name ?? null) : null;
    out.failed = { at: at.toISOString(), check, detail: error.message };
  }
  return out;
}

/** Who sees this machine's address, said plainly (docs/ohttp.md). */
export function relayWords(relayUrl: string | undefined): ConnectStatus['relay'] {
  if (relayUrl === undefined)
    return { url: 'none', meaning: 'no relay: the service sees your address (--ohttp-relay URL sends every request through an Oblivious HTTP relay instead)' };
  return {
    url: relayUrl,
    meaning: `every request goes through the Oblivious HTTP relay ${relayUrl}, sealed to the attested gateway key: the service sees the relay's address, not yours, and the relay sees your address, not what you ask`,
  };
}

export function connectStatus(service: string, attested: Attested, book: ReceiptBook, renewal: Renewal, now: Date, relayUrl?: string): ConnectStatus {
  const headline = headlineOf(attested.verdict, attested.tee);
  const words = HEADLINE_WORDS[headline];
  return {
    service,
    verdict: { headline, text: words.text, detail: words.detail, outcome: attested.verdict.outcome, summary: attested.verdict.summary },
    attested_at: attested.at.toISOString(),
    tee: attested.tee,
    measurement: attested.measurement,
    bodies: relayUrl !== undefined ? 'sealed (Oblivious HTTP)' : attested.hpkeKeyConfig === null ? 'not sealed' : 'sealed (EHBP)',
    relay: relayWords(relayUrl),
    tls:
      relayUrl !== undefined
        ? 'not used: the relay carries every request, sealed to the attested key'
        : attested.tlsSpkiSha256 !== null
          ? 'pinned to the attested key'
          : new URL(service).protocol === 'http:'
            ? 'plain HTTP'
            : 'not ending in the enclave (bodies sealed instead)',
    checks: attested.checks.map(statusCheck),
    receipts: { verified: book.verified, failed: book.failed, recent: [...book.recent] },
    renewal: renewalOf(renewal, now),
    freshness: freshnessWords(attested),
    log: { kept_by_service: attested.transparencyLog !== null, included: book.included, not_included: book.notIncluded, pending: book.pendingLog },
    ...(book.halted === undefined ? {} : { stopped: `no answer is passed on any more: the service's transparency log failed (${book.halted})` }),
  };
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** `GET /`: the same status for a person, a static page with no script. */
export function statusPage(s: ConnectStatus): string {
  const row = (c: StatusCheck) =>
    `<tr class="${c.result === 'PASS' ? 'pass' : c.result === 'FAIL' ? 'fail' : 'note'}"><td>${c.result}</td><td><b>${escape(c.title)}</b> <code>${escape(c.name)}</code><br>${escape(c.explains)}<br><small>${escape(c.detail)}${c.waived === undefined ? '' : ` (waived: ${escape(c.waived)})`}</small></td></tr>`;
  const receipt = (r: SeenReceipt) =>
    `<tr class="${r.ok ? 'pass' : 'fail'}"><td>${r.ok ? 'VERIFIED' : 'FAILED'}</td><td>${escape(r.at)}</td><td>${escape(r.path)}${r.stream ? ' (stream)' : ''}</td><td>${escape(r.model ?? '')}</td><td><code>${escape(r.receipt_id ?? '')}</code>${r.ok ? '' : ` ${escape(r.problem ?? r.failed.join(', '))}`}</td><td>${r.log === undefined ? '' : `log: ${escape(r.log)}${r.log_index === undefined ? '' : ` (entry ${r.log_index})`}${r.log_problem === undefined ? '' : ` ${escape(r.log_problem)}`}`}</td></tr>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sigil connect: ${escape(s.service)}</title>
<style>body{font:15px/1.4 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}table{border-collapse:collapse;width:100%}td{border-top:1px solid #ddd;padding:.3rem;vertical-align:top}.pass td:first-child{color:#060}.fail td:first-child{color:#b00}.note td:first-child{color:#850}h1.pass{color:#060}h1.fail{color:#b00}h1.note{color:#850}</style></head>
<body>
<p>sigil connect, for <code>${escape(s.service)}</code></p>
<h1 class="${HEADLINE_WORDS[s.verdict.headline].tone}">${escape(s.verdict.text)}</h1>
<p>${escape(s.verdict.detail)}</p>
<p><code>${escape(s.verdict.summary)}</code>, attested at ${escape(s.attested_at)} (${s.renewal.verdict_age_seconds} s ago; next re-attestation ${escape(s.renewal.next_reattestation)}). Bodies ${escape(s.bodies)}; TLS ${escape(s.tls)}.</p>
<p>Who sees your address: ${escape(s.relay.meaning)}.</p>
${s.renewal.failed === undefined ? '' : `<p class="fail"><b>The last re-attestation failed</b> at ${escape(s.renewal.failed.at)}${s.renewal.failed.check === null ? '' : ` (${escape(s.renewal.failed.check)})`}: no answer is passed on until one succeeds. ${escape(s.renewal.failed.detail)}</p>`}
<p>Freshness: ${escape(s.freshness)}.</p>
<h2>Checks</h2>
<table>${s.checks.map(row).join('\n')}</table>
<h2>Receipts</h2>
<p>${s.receipts.verified} verified, ${s.receipts.failed} failed since connect started.</p>
${s.stopped === undefined ? '' : `<p class="fail"><b>${escape(s.stopped)}</b></p>`}
<p>${s.log.kept_by_service ? `Transparency log: ${s.log.included} receipts proven included, ${s.log.not_included} NOT included, ${s.log.pending} pending.` : 'The service keeps no transparency log: nothing proves its receipts were published.'}</p>
<table>${[...s.receipts.recent].reverse().map(receipt).join('\n')}</table>
<p><a href="/status">/status</a> has the same as JSON.</p>
</body></html>
`;
}
