import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttestedFetch, type AttestedFetch, type InclusionVerdict, type ReceiptResult } from '../../src/client/index.ts';
import { checkMark } from '../../src/verify/check.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { attestedLog } from '../support/transparency-log.ts';

/** Issue 39, "verifiers check it": the attested client proves each receipt it receives is in the attested log, and that the log only grows. */
let engine: TestEngine;
/** Encrypted bodies (the default) and a log; the same without EHBP. */
let sealed: TestSigil;
let clear: TestSigil;
const logDir = () => mkdtempSync(join(tmpdir(), 'sigil-tlog-client-'));

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  [sealed, clear] = await Promise.all([
    startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { transparency_log: { dir: logDir(), batch_ms: 50 } } }),
    startTestSigil({
      upstreams: { e: { url: engine.baseUrl } },
      models: [{ id: 'm' }],
      config: { transparency_log: { dir: logDir(), batch_ms: 50 }, ehbp: { enabled: false } },
    }),
  ]);
});

afterAll(async () => {
  await Promise.all([sealed.close(0), clear.close(0)]);
  await engine.close();
});

async function chat(attested: AttestedFetch, s: TestSigil, base: string, stream = false): Promise<ReceiptResult> {
  const res = await attested(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'prove me' }], stream }),
  });
  expect(res.status).toBe(200);
  await res.text();
  return attested.receipts.at(-1)!;
}

const marks = (v: InclusionVerdict) => v.checks.map((c) => `${checkMark(c)} ${c.name}`);

describe('the attested client checks the inclusion of the receipts it receives', () => {
  let attested: AttestedFetch;
  const verdicts: InclusionVerdict[] = [];
  /** The message receipt of the last JSON answer, as the client received it. */
  let lastReceipt = '';
  beforeAll(async () => {
    attested = await createAttestedFetch({
      baseURL: `${sealed.url}/v1`,
      allowNoTee: true,
      onInclusion: (v) => verdicts.push(v),
      onExchange: (exchange) => (lastReceipt = exchange.receiptHeader ?? lastReceipt),
    });
  });
  afterAll(async () => attested.close());

  it('sealed JSON: the opened response names the leaf index, and the receipt is proven in the log under the attested key', async () => {
    expect(attested.attestation.transparencyLog?.origin).toBe((await attestedLog(sealed.url)).log.origin);
    const result = await chat(attested, sealed, sealed.url);
    expect(result.ok).toBe(true);
    expect(result.logIndex).toEqual(expect.any(Number));
    const verdict = (await result.inclusion)!;
    expect(marks(verdict)).toEqual(['PASS log.checkpoint', 'PASS log.consistency', 'PASS log.inclusion']);
    expect(verdict.ok).toBe(true);
    expect(verdict.index).toBe(result.logIndex);
    expect(verdict.receiptId).toBe(result.claims!.receipt_id);
    expect(verdict.detail).toMatch(
      new RegExp(
        `^receipt ${verdict.receiptId} is entry ${verdict.index} of the log .+, proven under a checkpoint of \\d+ entries signed by the attested log key`,
      ),
    );
    expect(verdicts.at(-1)).toBe(verdict);
  });

  it('sealed stream: the index travels in the sealed receipt comment; each new checkpoint is proven to extend the last one kept', async () => {
    const result = await chat(attested, sealed, sealed.url, true);
    const verdict = (await result.inclusion)!;
    expect(verdict.ok).toBe(true);
    expect(verdict.index).toBe(result.logIndex);
    expect(verdict.checks.find((c) => c.name === 'log.consistency')!.detail).toMatch(
      /^(the log's consistency proof shows the tree of \d+ entries seen before is a prefix of this one of \d+: it only grew|the first checkpoint)/,
    );
    const again = (await (await chat(attested, sealed, sealed.url)).inclusion)!;
    expect(again.checks.find((c) => c.name === 'log.consistency')!.detail).toMatch(/^the log's consistency proof shows the tree of \d+ entries seen before/);
  });

  it('`checkInclusion` checks a receipt kept from before; one the log never held fails in plain words', async () => {
    const kept = attested.receipts.at(-1)!;
    const jws = lastReceipt;
    expect(jws.split('.')[1]).toBe(Buffer.from(JSON.stringify(kept.claims)).toString('base64url'));
    expect((await attested.checkInclusion(jws)).ok).toBe(true);
    const other = await attested.checkInclusion(jws.slice(0, -4) + 'AAAA', kept.logIndex);
    expect(other.ok).toBe(false);
    expect(other.detail).toMatch(/^log\.inclusion: ERR_TLOG_PROOF: the log holds no entry equal to SHA-256 of this receipt at index \d+/);
  });

  it('a clear stream: the message receipt is found by its receipt id, the model receipt at the header index', async () => {
    const plain = await createAttestedFetch({ baseURL: `${clear.url}/v1`, allowNoTee: true, onInclusion: () => undefined });
    try {
      const result = await chat(plain, clear, clear.url, true);
      expect(result.logIndex).toBeUndefined();
      const verdict = (await result.inclusion)!;
      expect(verdict.ok).toBe(true);
      expect(verdict.index).toEqual(expect.any(Number));
      const json = await chat(plain, clear, clear.url);
      expect((await json.inclusion)!.index).toBe(json.logIndex);
    } finally {
      await plain.close();
    }
  });
});

describe('a log that omits a leaf, forks or shows a tampered checkpoint is a clear failure', () => {
  let proxy: ForgingProxy;
  let attested: AttestedFetch;
  const verdicts: InclusionVerdict[] = [];
  beforeAll(async () => {
    proxy = await startForgingProxy(sealed.url);
    attested = await createAttestedFetch({ baseURL: `${proxy.url}/v1`, allowNoTee: true, onInclusion: (v) => verdicts.push(v) });
  });
  afterAll(async () => {
    await attested.close();
    await proxy.close();
  });

  it('passes through an honest relay', async () => {
    expect((await (await chat(attested, sealed, proxy.url)).inclusion)!.ok).toBe(true);
  });

  it('a proof that omits the leaf: log.inclusion fails', async () => {
    proxy.rewrite = (_m, path) =>
      path.startsWith('/v1/log/proof') ? (body) => Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), proofs: [] })) : undefined;
    try {
      const verdict = (await (await chat(attested, sealed, proxy.url)).inclusion)!;
      expect(verdict.ok).toBe(false);
      expect(marks(verdict)).toEqual(['PASS log.checkpoint', 'PASS log.consistency', 'FAIL log.inclusion']);
      expect(verdict.detail).toMatch(
        /^log\.inclusion: ERR_TLOG_PROOF: the log holds no entry equal to SHA-256 of this receipt at index \d+: the receipt was not logged there$/,
      );
    } finally {
      proxy.reset();
    }
  });

  it('a tampered inclusion proof: log.inclusion fails', async () => {
    proxy.rewrite = (_m, path) => (path.startsWith('/v1/log/proof') ? flipFirstHash('proofs') : undefined);
    try {
      const verdict = (await (await chat(attested, sealed, proxy.url)).inclusion)!;
      expect(marks(verdict)).toEqual(['PASS log.checkpoint', 'PASS log.consistency', 'FAIL log.inclusion']);
      expect(verdict.detail).toMatch(/^log\.inclusion: ERR_TLOG_PROOF: /);
    } finally {
      proxy.reset();
    }
  });

  it('a tampered checkpoint: log.checkpoint fails (the attested log key did not sign it)', async () => {
    proxy.rewrite = (_m, path) =>
      path === '/v1/log/checkpoint'
        ? (body) => {
            const lines = body.toString().split('\n');
            lines[1] = String(Number(lines[1]) + 1);
            return Buffer.from(lines.join('\n'));
          }
        : undefined;
    try {
      const verdict = (await (await chat(attested, sealed, proxy.url)).inclusion)!;
      expect(marks(verdict)).toEqual(['FAIL log.checkpoint']);
      expect(verdict.detail).toMatch(/^log\.checkpoint: ERR_TLOG_SIGNATURE: /);
    } finally {
      proxy.reset();
    }
  });

  it('an inconsistent (forked) view: a consistency proof that does not hold fails log.consistency', async () => {
    proxy.rewrite = (_m, path) => (path.startsWith('/v1/log/consistency') ? flipFirstHash('proof') : undefined);
    try {
      const verdict = (await (await chat(attested, sealed, proxy.url)).inclusion)!;
      expect(marks(verdict)).toEqual(['PASS log.checkpoint', 'FAIL log.consistency']);
      expect(verdict.detail).toMatch(/does not extend the one this client kept before, so the log forked, was truncated or was rewritten$/);
    } finally {
      proxy.reset();
    }
  });

  it('a rolled-back view: an older checkpoint, genuinely signed, after a newer one was seen, fails log.consistency', async () => {
    const old = await (await fetch(`${sealed.url}/v1/log/checkpoint`)).text();
    expect((await (await chat(attested, sealed, proxy.url)).inclusion)!.ok).toBe(true);
    proxy.forge = (method, path) =>
      method === 'GET' && path === '/v1/log/checkpoint' ? { status: 200, headers: { 'content-type': 'text/plain' }, body: old } : undefined;
    try {
      const verdict = (await (await chat(attested, sealed, proxy.url)).inclusion)!;
      expect(marks(verdict)).toEqual(['PASS log.checkpoint', 'FAIL log.consistency']);
      expect(verdict.detail).toMatch(/it was truncated or shows a split view/);
    } finally {
      proxy.reset();
    }
  });

  it('a state file keeps the last checkpoint across clients: a later client shown an older checkpoint fails', async () => {
    const state = join(logDir(), 'seen.json');
    const old = await (await fetch(`${sealed.url}/v1/log/checkpoint`)).text();
    let receipt = '';
    const first = await createAttestedFetch({
      baseURL: `${proxy.url}/v1`,
      allowNoTee: true,
      logStateFile: state,
      onInclusion: () => undefined,
      onExchange: (exchange) => (receipt = exchange.receiptHeader ?? ''),
    });
    const kept = (await (await chat(first, sealed, proxy.url)).inclusion)!;
    await first.close();
    const seen = JSON.parse(readFileSync(state, 'utf8')) as Record<string, { size: number }>;
    expect(seen[kept.checkpoint!.origin]!.size).toBe(kept.checkpoint!.size);
    const later = await createAttestedFetch({ baseURL: `${proxy.url}/v1`, allowNoTee: true, logStateFile: state, onInclusion: () => undefined });
    proxy.forge = (method, path) =>
      method === 'GET' && path === '/v1/log/checkpoint' ? { status: 200, headers: { 'content-type': 'text/plain' }, body: old } : undefined;
    try {
      const verdict = await later.checkInclusion(receipt, kept.index);
      expect(marks(verdict)).toEqual(['PASS log.checkpoint', 'FAIL log.consistency']);
    } finally {
      proxy.reset();
      await later.close();
    }
  });

  it('without onInclusion, a failure is a process warning, never silent', async () => {
    const quiet = await createAttestedFetch({ baseURL: `${proxy.url}/v1`, allowNoTee: true });
    proxy.rewrite = (_m, path) =>
      path.startsWith('/v1/log/proof') ? (body) => Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), proofs: [] })) : undefined;
    try {
      const warned = new Promise<Error & { code?: string }>((resolve) => process.once('warning', resolve));
      const verdict = (await (await chat(quiet, sealed, proxy.url)).inclusion)!;
      const warning = await warned;
      expect(warning.code).toBe('SIGIL_LOG_INCLUSION');
      expect(warning.message).toBe(`receipt ${verdict.receiptId}: ${verdict.detail}`);
    } finally {
      proxy.reset();
      await quiet.close();
    }
  });
});

/** Rewrites a proof answer with the first hash of `field` (a list, or the first proof's list) changed. */
function flipFirstHash(field: 'proof' | 'proofs'): (body: Buffer) => Buffer {
  return (body) => {
    const answer = JSON.parse(body.toString()) as { proof?: string[]; proofs?: Array<{ proof: string[] }> };
    const list = field === 'proof' ? answer.proof! : answer.proofs![0]!.proof;
    expect(list.length).toBeGreaterThan(0);
    const hash = Buffer.from(list[0]!, 'base64');
    hash[0]! ^= 1;
    list[0] = hash.toString('base64');
    return Buffer.from(JSON.stringify(answer));
  };
}
