import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConnect, type RunningConnect } from '../../src/connect/start.ts';
import { engineAndSigil } from '../support/engine-and-sigil.ts';

/**
 * Clients that are not TypeScript, unchanged, through sigil connect to a real Sigil (TLS in the enclave, sealed bodies):
 * curl, and Python with Debian's httpx and requests, talking HTTP as the openai Python package does
 * (scripts/test-packages.mjs installs them).
 */
const run = promisify(execFile);
const PYTHON = '/usr/bin/python3';
const both = engineAndSigil({ modelNames: ['m'], models: [{ id: 'm' }], config: { tls: { mode: 'self-signed', hostnames: ['localhost'] } } });
let connect: RunningConnect;

beforeAll(async () => {
  connect = await startConnect({ service: both.sigil.url.replace('127.0.0.1', 'localhost'), listen: { host: '127.0.0.1', port: 0 }, allowNoTee: true });
});
afterAll(async () => connect.close());

const body = (stream: boolean) => JSON.stringify({ model: 'm', stream, messages: [{ role: 'user', content: 'hello from outside' }] });
/** The content deltas of an SSE stream, read as SSE says: an event's `data:` lines, its comment lines (EHBP's padding) skipped. */
const deltasOf = (sse: string) =>
  sse
    .split('\n\n')
    .map((event) =>
      event
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice(6))
        .join('\n'),
    )
    .filter((data) => data.startsWith('{'))
    .map((data) => (JSON.parse(data) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '')
    .join('');

describe('curl through sigil connect', () => {
  const curl = (args: string[]) =>
    run('curl', ['-sS', '--no-buffer', '-H', `Authorization: Bearer ${both.sigil.key}`, '-H', 'Content-Type: application/json', ...args]);

  it('gets a JSON completion whose receipt verified', async () => {
    const before = connect.status().receipts.verified;
    const { stdout } = await curl(['-d', body(false), `${connect.url}/v1/chat/completions`]);
    expect((JSON.parse(stdout) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content).toBe(both.engine.reply);
    expect(connect.status().receipts.verified).toBe(before + 1);
  });

  it('gets a stream that ends with [DONE] once its receipt verified', async () => {
    const { stdout } = await curl(['-d', body(true), `${connect.url}/v1/chat/completions`]);
    expect(deltasOf(stdout)).toBe(both.engine.reply);
    expect(stdout.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(connect.fetch.receipts.at(-1)).toMatchObject({ stream: true, ok: true });
  });

  it('reads the status JSON', async () => {
    const { stdout } = await run('curl', ['-sS', `${connect.url}/status`]);
    expect((JSON.parse(stdout) as { verdict: { headline: string } }).verdict.headline).toBe('development');
  });
});

const PY_CLIENT = String.raw`
import json, sys
import httpx, requests
base, key = sys.argv[1], sys.argv[2]
headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
body = {"model": "m", "messages": [{"role": "user", "content": "hello from python"}]}
out = {}
with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
    answer = client.post("/chat/completions", json=body)
    out["httpx_status"] = answer.status_code
    out["httpx_content"] = answer.json()["choices"][0]["message"]["content"]
    deltas, last = [], None
    with client.stream("POST", "/chat/completions", json={**body, "stream": True}) as stream:
        for line in stream.iter_lines():
            line = line.rstrip("\r\n")  # Debian's httpx 0.23 keeps the line ending
            if not line.startswith("data: "):
                continue
            last = line[6:]
            if last != "[DONE]":
                deltas.append(json.loads(last)["choices"][0]["delta"].get("content") or "")
    out["httpx_stream"] = "".join(deltas)
    out["httpx_last"] = last
    wrong = client.post("/chat/completions", json=body, headers={"Authorization": "Bearer sk-wrong"})
    out["httpx_wrong_key"] = [wrong.status_code, wrong.json()["error"]["code"]]
answer = requests.post(base + "/chat/completions", json=body, headers=headers, timeout=30)
out["requests_status"] = answer.status_code
out["requests_content"] = answer.json()["choices"][0]["message"]["content"]
print(json.dumps(out))
`;

describe('Python (httpx, requests) through sigil connect', () => {
  it('gets JSON and streamed completions with verified receipts, and the service own 401', async () => {
    const before = connect.status().receipts.verified;
    const { stdout } = await run(PYTHON, ['-c', PY_CLIENT, `${connect.url}/v1`, both.sigil.key]);
    expect(JSON.parse(stdout)).toEqual({
      httpx_status: 200,
      httpx_content: both.engine.reply,
      httpx_stream: both.engine.reply,
      httpx_last: '[DONE]',
      httpx_wrong_key: [401, 'invalid_api_key'],
      requests_status: 200,
      requests_content: both.engine.reply,
    });
    expect(connect.status().receipts).toMatchObject({ verified: before + 3, failed: 0 });
  });
});
