import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSigilVerify } from '../support/cli.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 50: `sigil verify --api messages`, live and on a kept receipt, against a service serving Anthropic's Messages API. */
let engine: TestEngine;
let sigil: TestSigil;
let proxy: ForgingProxy;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm1', endpoints: ['chat', 'messages'] }],
    config: { attestation: { provider: 'none' }, ehbp: { enabled: false }, log: { level: 'silent' }, limits: { fresh_attestation_burst: 1000 } },
  });
  proxy = await startForgingProxy(sigil.url);
});
afterAll(async () => {
  await proxy.close();
  await sigil.close(0);
  await engine.close();
});

/** The checks a run printed, as `MARK name`, only those that did not pass. */
async function notPassed(argv: string[]): Promise<{ code: number; lines: string[]; stdout: string }> {
  const { code, stdout } = await runSigilVerify(argv, {});
  const lines = stdout
    .split('\n')
    .map((l) => /^(FAIL|WAIVED|----) (\S+) — /.exec(l))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => `${m[1]} ${m[2]}`);
  return { code, lines, stdout };
}

const NO_TEE_WAIVED = ['WAIVED attestation.tls_key', 'WAIVED attestation.tee', 'WAIVED attestation.manifest', 'WAIVED receipt.tee'];

describe('sigil verify --api messages', () => {
  it('live, JSON: sends a Messages request and passes every check, the endpoint included', async () => {
    const r = await notPassed(['--url', sigil.url, '--api-key', sigil.key, '--api', 'messages', '--model', 'm1', '--allow-no-tee']);
    expect(r.lines).toEqual(NO_TEE_WAIVED);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('PASS receipt.endpoint — endpoint is /v1/messages, as expected');
    expect(r.stdout).toContain('PASS live.request — JSON message (/v1/messages) from m1');
    expect(engine.requests.at(-1)!.path).toBe('/v1/messages');
  });

  it('live, stream: the message receipt after message_stop, and the model receipt, both name /v1/messages', async () => {
    const r = await notPassed(['--url', sigil.url, '--api-key', sigil.key, '--api', 'messages', '--stream', '--model', 'm1', '--allow-no-tee']);
    expect(r.lines).toEqual([...NO_TEE_WAIVED, 'WAIVED model_receipt.tee']);
    expect(r.stdout).toContain('PASS model_receipt.endpoint — endpoint is /v1/messages, as expected');
    expect(r.stdout).toContain('message receipt from the stream comment');
  });

  it('a service that answers a Messages request with a chat receipt fails receipt.endpoint', async () => {
    // A relay that sends the Messages request to the chat endpoint: its receipt is a real one, signed for another API.
    proxy.redirect = (method, path) => (method === 'POST' && path === '/v1/messages' ? '/v1/chat/completions' : path);
    try {
      const r = await notPassed(['--url', proxy.url, '--api-key', sigil.key, '--api', 'messages', '--model', 'm1', '--allow-no-tee']);
      expect(r.code).toBe(1);
      expect(r.lines).toContain('FAIL receipt.endpoint');
      expect(r.stdout).toContain('FAIL receipt.endpoint — endpoint is /v1/chat/completions; expected /v1/messages');
    } finally {
      proxy.reset();
    }
  });

  it('a kept Messages receipt verifies with --api messages, and fails as a chat receipt', async () => {
    const request = JSON.stringify({ model: 'm1', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
    const res = await fetch(`${sigil.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': sigil.key, 'content-type': 'application/json', 'x-service-receipt': 'true' },
      body: request,
    });
    const dir = mkdtempSync(join(tmpdir(), 'sigil-verify-messages-'));
    writeFileSync(join(dir, 'receipt'), res.headers.get('x-service-receipt')!);
    writeFileSync(join(dir, 'request'), request);
    writeFileSync(join(dir, 'response'), Buffer.from(await res.arrayBuffer()));
    const kept = ['--url', sigil.url, '--request', join(dir, 'request'), '--response', join(dir, 'response'), '--allow-no-tee'];
    const asMessages = await notPassed([join(dir, 'receipt'), ...kept, '--api', 'messages']);
    expect(asMessages.lines.filter((l) => l.startsWith('FAIL'))).toEqual([]);
    const asChat = await notPassed([join(dir, 'receipt'), ...kept]);
    expect(asChat.lines.filter((l) => l.startsWith('FAIL'))).toEqual(['FAIL receipt.endpoint']);
  });

  it('refuses an --api it does not know', async () => {
    const { code, stderr } = await runSigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--api', 'completions'], {});
    expect(code).toBe(2);
    expect(stderr).toContain('--api is chat or messages');
  });
});
