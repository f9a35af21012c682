import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConnect, type RunningConnect } from '../../src/connect/start.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 39: `sigil connect` checks that the attested log holds each receipt passing through it, and says so when it does not. */
let engine: TestEngine;
let sigil: TestSigil;
let proxy: ForgingProxy;
const PROMPT = 'a private question 93c1';

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { transparency_log: { dir: mkdtempSync(join(tmpdir(), 'sigil-tlog-connect-')), batch_ms: 50 } },
  });
  proxy = await startForgingProxy(sigil.url);
});

afterAll(async () => {
  await proxy.close();
  await sigil.close(0);
  await engine.close();
});

async function connectTo(service: string, lines: string[]): Promise<RunningConnect> {
  return startConnect({
    service,
    listen: { host: '127.0.0.1', port: 0 },
    allowNoTee: true,
    allowInsecureHttp: true,
    onFailedReceipt: (line) => lines.push(line),
  });
}

/** One chat through connect; resolves once the receipt's inclusion check has settled (the event the client exposes). */
async function chatThrough(connect: RunningConnect, stream = false): Promise<void> {
  const res = await fetch(`${connect.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream, messages: [{ role: 'user', content: PROMPT }] }),
  });
  expect(res.status).toBe(200);
  await res.text();
  await connect.fetch.receipts.at(-1)!.inclusion;
}

describe('sigil connect and the transparency log', () => {
  it('reports each receipt included in the attested log, on /status and the status page', async () => {
    const lines: string[] = [];
    const connect = await connectTo(sigil.url, lines);
    try {
      await chatThrough(connect);
      await chatThrough(connect, true);
      const status = connect.status();
      expect(status.log).toEqual({ kept_by_service: true, included: 2, not_included: 0, pending: 0 });
      const seen = status.receipts.recent.at(-1)!;
      expect(seen.log).toBe('included');
      expect(seen.log_index).toEqual(expect.any(Number));
      const page = await (await fetch(`${connect.url}/`)).text();
      expect(page).toContain('Transparency log: 2 receipts proven included, 0 NOT included, 0 pending.');
      expect(lines).toEqual([]);
    } finally {
      await connect.close();
    }
  });

  it('a log that omits the leaf: a log line names the receipt id and the failure, never the prompt; /status counts it', async () => {
    const lines: string[] = [];
    const connect = await connectTo(proxy.url, lines);
    proxy.rewrite = (_m, path) =>
      path.startsWith('/v1/log/proof') ? (body) => Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), proofs: [] })) : undefined;
    try {
      await chatThrough(connect);
      const id = connect.fetch.receipts.at(-1)!.claims!.receipt_id;
      expect(lines).toEqual([
        expect.stringMatching(
          new RegExp(
            `^receipt ${id} of the JSON answer to /v1/chat/completions failed its transparency-log check: log\\.inclusion: ERR_TLOG_PROOF: the log holds no entry equal to SHA-256 of this receipt at index \\d+`,
          ),
        ),
      ]);
      expect(lines[0]).not.toContain(PROMPT);
      const status = connect.status();
      expect(status.log).toEqual({ kept_by_service: true, included: 0, not_included: 1, pending: 0 });
      expect(status.receipts.recent.at(-1)!.log).toBe('NOT included');
      expect(status.receipts.recent.at(-1)!.log_problem).toMatch(/^log\.inclusion: ERR_TLOG_PROOF/);
    } finally {
      proxy.reset();
      await connect.close();
    }
  });
});

describe('sigil connect fails closed on the transparency log', () => {
  const omitLeaf = () =>
    (proxy.rewrite = (_m, path) =>
      path.startsWith('/v1/log/proof') ? (body) => Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), proofs: [] })) : undefined);
  const chat = (connect: RunningConnect) =>
    fetch(`${connect.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: PROMPT }] }),
    });
  const chats = () => engine.requests.filter((r) => r.path === '/v1/chat/completions').length;

  it('once the log is proven not to hold a receipt, answers nothing more (502 transparency_log_failed) and says why', async () => {
    const connect = await connectTo(proxy.url, []);
    omitLeaf();
    try {
      await chatThrough(connect);
      const id = connect.fetch.receipts.at(-1)!.claims!.receipt_id;
      const before = chats();
      const refused = await chat(connect);
      expect(refused.status).toBe(502);
      const body = (await refused.json()) as { error: { code: string; param: string; message: string; type: string } };
      expect(body.error).toMatchObject({ code: 'transparency_log_failed', param: 'log.inclusion', type: 'verification_error' });
      expect(body.error.message).toMatch(
        new RegExp(
          `^sigil connect stopped passing answers on: the service's transparency log failed for receipt ${id} \\(ERR_TLOG_PROOF: the log holds no entry`,
        ),
      );
      expect(body.error.message).not.toContain(PROMPT);
      expect(chats()).toBe(before);
      expect(connect.status().stopped).toMatch(
        new RegExp(`^no answer is passed on any more: the service's transparency log failed \\(receipt ${id}: log\\.inclusion: ERR_TLOG_PROOF`),
      );
    } finally {
      proxy.reset();
      await connect.close();
    }
  });

  it('--require-inclusion holds a JSON answer until its inclusion proof verified', async () => {
    const connect = await startConnect({
      service: sigil.url,
      listen: { host: '127.0.0.1', port: 0 },
      allowNoTee: true,
      allowInsecureHttp: true,
      requireInclusion: true,
    });
    try {
      const answer = await chat(connect);
      expect(answer.status).toBe(200);
      // Settled before the answer was handed over: no waiting on it here.
      expect(connect.status().log).toEqual({ kept_by_service: true, included: 1, not_included: 0, pending: 0 });
      expect(connect.status().receipts.recent.at(-1)!.log).toBe('included');
    } finally {
      await connect.close();
    }
  });

  it('--require-inclusion refuses an answer whose receipt the log does not hold: 502 naming log.inclusion, never the answer', async () => {
    const connect = await startConnect({
      service: proxy.url,
      listen: { host: '127.0.0.1', port: 0 },
      allowNoTee: true,
      allowInsecureHttp: true,
      requireInclusion: true,
    });
    omitLeaf();
    try {
      const refused = await chat(connect);
      expect(refused.status).toBe(502);
      const body = (await refused.json()) as { error: { code: string; param: string; message: string } };
      expect(body.error).toMatchObject({ code: 'receipt_verification_failed', param: 'log.inclusion' });
      expect(body.error.message).toMatch(/^sigil connect did not pass this answer on: the answer's receipt is not proven in the service's log: /);
      expect(JSON.stringify(body)).not.toContain(engine.reply);
    } finally {
      proxy.reset();
      await connect.close();
    }
  });

  it('--require-inclusion refuses to start against a service that keeps no log', async () => {
    const bare = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
    try {
      const refused = await startConnect({
        service: bare.url,
        listen: { host: '127.0.0.1', port: 0 },
        allowNoTee: true,
        allowInsecureHttp: true,
        requireInclusion: true,
      }).catch((e: unknown) => e as Error);
      expect((refused as Error).message).toBe(
        `--require-inclusion: ${bare.url}'s attestation names no transparency log, so no answer could ever be proven logged`,
      );
    } finally {
      await bare.close(0);
    }
  });
});
