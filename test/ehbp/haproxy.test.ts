import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttestedFetch } from '../../src/client/index.ts';
import { freePort } from '../support/free-port.ts';
import { selfSignedLocalhost } from '../support/self-signed.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { waitFor } from '../support/wait-for.ts';

/**
 * SPEC 9 / issue 13: a real load balancer (Debian's haproxy) in front of Sigil, ending TLS and logging what
 * it sees, request bodies included; a recorder between it and Sigil keeps every byte it forwarded either way.
 * The client gets its answers and verified receipts; neither the prompt nor the answer is in anything haproxy handled.
 */
let engine: TestEngine;
let sigil: TestSigil;
let haproxy: ChildProcess;
let recorder: Server;
const haproxyLog: string[] = [];
const forwarded: Buffer[] = [];
let haproxyUrl = '';
let haproxyCert = '';
const PROMPT = 'my confidential prompt 93b1e';

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
  const sigilPort = Number(new URL(sigil.url).port);

  const sockets = new Set<Socket>();
  recorder = createServer((front) => {
    const back = connect(sigilPort, '127.0.0.1');
    for (const s of [front, back]) {
      sockets.add(s);
      s.on('error', () => s.destroy());
      s.on('close', () => sockets.delete(s));
    }
    front.on('data', (d: Buffer) => {
      forwarded.push(d);
      back.write(d);
    });
    back.on('data', (d: Buffer) => {
      forwarded.push(d);
      front.write(d);
    });
    front.on('close', () => back.destroy());
    back.on('close', () => front.destroy());
  });
  await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
  const recorderPort = (recorder.address() as { port: number }).port;

  const dir = mkdtempSync(join(tmpdir(), 'sigil-haproxy-'));
  selfSignedLocalhost(dir, { days: 2 });
  haproxyCert = readFileSync(join(dir, 'cert.pem'), 'utf8');
  writeFileSync(join(dir, 'haproxy.pem'), haproxyCert + readFileSync(join(dir, 'key.pem'), 'utf8'));
  const port = await freePort();
  writeFileSync(
    join(dir, 'haproxy.cfg'),
    [
      'global',
      '  log stdout format raw local0',
      'defaults',
      '  mode http',
      '  log global',
      '  timeout connect 5s',
      '  timeout client 30s',
      '  timeout server 30s',
      'frontend fe',
      `  bind 127.0.0.1:${port} ssl crt ${join(dir, 'haproxy.pem')}`,
      // What a curious load balancer keeps: every request line, status and request body it can buffer.
      '  http-request wait-for-body time 5s',
      '  http-request set-var(txn.reqbody) req.body,hex',
      '  log-format "%HM %HU %ST reqbody=%[var(txn.reqbody)]"',
      '  default_backend be',
      'backend be',
      `  server sigil 127.0.0.1:${recorderPort}`,
    ].join('\n') + '\n',
  );
  haproxy = spawn('haproxy', ['-db', '-f', join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'pipe', 'pipe'] });
  const keep = (d: Buffer) => haproxyLog.push(...d.toString('latin1').split('\n').filter(Boolean));
  haproxy.stdout!.on('data', keep);
  haproxy.stderr!.on('data', keep);
  await waitFor('haproxy listening', async () => {
    if (haproxy.exitCode !== null) throw new Error(`haproxy did not start: ${haproxyLog.join(' | ')}`);
    return new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
  });
  haproxyUrl = `https://localhost:${port}`;
});

afterAll(async () => {
  haproxy?.kill('SIGKILL');
  await new Promise((resolve) => recorder.close(resolve));
  await sigil.close(0);
  await engine.close();
});

describe('Sigil behind haproxy ending TLS', () => {
  it('gives the client its answers and verified receipts while haproxy handles only ciphertext bodies', async () => {
    const attested = await createAttestedFetch({ baseURL: `${haproxyUrl}/v1`, allowNoTee: true, ca: haproxyCert });
    try {
      expect(attested.attestation.checks.find((c) => c.name === 'attestation.hpke_key')?.ok).toBe(true);
      const client = new OpenAI({ baseURL: `${haproxyUrl}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      const completion = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] });
      const answer = completion.choices[0]!.message.content!;
      expect(answer.length).toBeGreaterThan(3);
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: false });

      const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: PROMPT }] });
      const pieces: string[] = [];
      for await (const chunk of stream) pieces.push(chunk.choices[0]?.delta?.content ?? '');
      expect(pieces.filter(Boolean).length).toBeGreaterThan(1);
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: true });

      // haproxy handled the requests: its log has both POSTs with their (sealed) bodies.
      const posts = await waitFor('both POSTs in the log', () => {
        const logged = haproxyLog.filter((l) => l.startsWith('POST /v1/chat/completions 200 reqbody='));
        return logged.length >= 2 && logged;
      });
      expect(posts.length).toBe(2);
      expect(posts.every((l) => l.length > 'POST /v1/chat/completions 200 reqbody='.length + 20)).toBe(true);
      // Its log holds the bodies in hex: read them back as bytes, as an operator with the log could.
      const loggedBodies = posts.map((l) => Buffer.from(l.slice(l.indexOf('reqbody=') + 8), 'hex').toString('latin1'));
      const everything = haproxyLog.join('\n') + loggedBodies.join('\n') + Buffer.concat(forwarded).toString('latin1');
      expect(everything).toContain('ehbp-encapsulated-key');
      expect(everything).not.toContain(PROMPT);
      expect(everything).not.toContain(answer);
      for (const piece of pieces.filter((p) => p.length > 4)) expect(everything).not.toContain(piece);
      expect(everything).not.toContain('"chat.completion');
      // The engine, inside the enclave, did get the prompt.
      expect(engine.requests.at(-1)!.body.toString('utf8')).toContain(PROMPT);
    } finally {
      await attested.close();
    }
  });
});
