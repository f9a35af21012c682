import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startSigilProcess, type SigilProcess } from '../support/sigil-process.ts';
import { hostPort } from '../support/raw-http.ts';
import { killChild } from '../support/kill-child.ts';
import { waitFor } from '../support/wait-for.ts';

const MIB = 1024 * 1024;
const ANSWER_BYTES = 60 * MIB;
const BUDGET = 256 * MIB;
/**
 * What the process may hold besides its baseline and the budget (docs/operations.md, "Memory and slow
 * clients"): the text and parsed value of the answers parsed last, and the chunks they arrived in, are
 * garbage until V8's next collection. Peaks of 390 MiB over the baseline were measured with two answers
 * admitted; without the budget, 12 such clients took well over 1.5 GiB.
 */
const OVERHEAD = 256 * MIB;

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()!();
});

/** An engine whose every chat answer is one JSON completion of about `answerBytes` (60 MiB by default). */
async function startBigAnswerEngine(answerBytes = ANSWER_BYTES): Promise<{ baseUrl: string; server: Server }> {
  const content = 'a'.repeat(answerBytes - 200);
  const answer = Buffer.from(
    JSON.stringify({
      id: 'chatcmpl-big',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    }),
  );
  const server = createServer((req, res) => {
    req.resume();
    if (req.method === 'GET') {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model', created: 1, owned_by: 'test' }] }));
      return;
    }
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }).end(answer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(() => new Promise((r) => server.close(r)));
  server.on('connection', (s) => cleanup.push(async () => s.destroy()));
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, server };
}

interface NeverReadingClient {
  /** The first bytes of the answer: its status line, headers and the start of its body. */
  head: string;
  /** Starts reading again and resolves with how many bytes arrived once the server has closed the connection. */
  drain(): Promise<number>;
}

/** A client that sends a chat request, reads the status line and headers of the answer, and then never reads again. */
function neverReadingClient(sigil: SigilProcess): Promise<NeverReadingClient> {
  const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  const socket = connect(hostPort(sigil.url));
  socket.on('error', () => undefined);
  cleanup.push(async () => socket.destroy());
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${sigil.key}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
  );
  return new Promise((resolve) => {
    socket.once('data', (first: Buffer) => {
      socket.pause();
      const drain = () =>
        new Promise<number>((done) => {
          let bytes = first.length;
          socket.on('data', (chunk: Buffer) => (bytes += chunk.length));
          socket.once('close', () => done(bytes));
          socket.resume();
        });
      resolve({ head: first.toString('latin1', 0, 1024), drain });
    });
  });
}

async function logLines(sigil: SigilProcess, msg: string, count: number, timeoutMs: number): Promise<number> {
  const logged = () => sigil.logs.filter((l) => l.msg === msg).length;
  return waitFor(`${count} log lines '${msg}'`, () => logged() >= count && logged(), { timeoutMs });
}

describe('memory under clients that never read their answers', () => {
  it(
    'holds buffered answers within limits.buffer_budget_bytes, refuses the rest with 503 and Retry-After, and frees what a stalled client held',
    { timeout: 90_000 },
    async () => {
      const engine = await startBigAnswerEngine();
      const sigil = await startSigilProcess(engine.baseUrl, { limits: { buffer_budget_bytes: BUDGET, client_read_timeout_ms: 3000 } });
      cleanup.push(() => killChild(sigil.child));
      const baseline = sigil.memory().rss;

      const clients = await Promise.all(Array.from({ length: 12 }, () => neverReadingClient(sigil)));
      const admitted = clients.filter((c) => c.head.startsWith('HTTP/1.1 200 '));
      const refused = clients.filter((c) => c.head.startsWith('HTTP/1.1 503 '));
      expect(admitted.length).toBeGreaterThanOrEqual(1);
      expect(admitted.length + refused.length).toBe(12);
      for (const { head } of refused) {
        expect(head).toMatch(/\r\nretry-after: 1\r\n/i);
        expect(head).toContain(
          '{"error":{"message":"This server\'s memory budget for requests and answers in flight is in use; retry shortly.","type":"service_unavailable","param":null,"code":"server_busy"}}',
        );
      }
      expect(sigil.memory().peak).toBeLessThan(baseline + BUDGET + OVERHEAD);

      // Past client_read_timeout_ms without a byte taken, each stalled client is cut and its answer dropped:
      // what reaches it afterwards is only what the kernel's buffers already held, never the whole answer.
      expect(await logLines(sigil, 'client stopped reading a buffered answer: connection closed', admitted.length, 15_000)).toBe(admitted.length);
      for (const client of admitted) expect(await client.drain()).toBeLessThan(ANSWER_BYTES);

      const res = await fetch(`${sigil.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(200);
      expect((await res.arrayBuffer()).byteLength).toBe(
        ANSWER_BYTES -
          200 +
          JSON.stringify({
            id: 'chatcmpl-big',
            object: 'chat.completion',
            created: 1,
            model: 'm',
            choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
          }).length,
      );
      expect(sigil.memory().peak).toBeLessThan(baseline + BUDGET + OVERHEAD);
    },
  );

  it(
    'with 4 workers, holds the buffered answers of all of them within one limits.buffer_budget_bytes, counted in the primary; the rest get 503 server_busy',
    { timeout: 90_000 },
    async () => {
      // Each admitted answer stays charged at its size while its client does not read: at most BUDGET / ANSWER of them fit.
      const answer = 8 * MIB;
      const budget = 40 * MIB;
      const engine = await startBigAnswerEngine(answer);
      const sigil = await startSigilProcess(engine.baseUrl, { workers: 4, limits: { buffer_budget_bytes: budget, client_read_timeout_ms: 20_000 } });
      cleanup.push(() => killChild(sigil.child));
      // Sixteen clients in four rounds, so that the primary hands each worker four of them.
      const clients: NeverReadingClient[] = [];
      for (let round = 0; round < 4; round++) clients.push(...(await Promise.all(Array.from({ length: 4 }, () => neverReadingClient(sigil)))));
      const admitted = clients.filter((c) => c.head.startsWith('HTTP/1.1 200 '));
      const refused = clients.filter((c) => c.head.startsWith('HTTP/1.1 503 '));
      expect(admitted.length + refused.length).toBe(16);
      expect(admitted.length).toBeGreaterThanOrEqual(1);
      expect(admitted.length * answer).toBeLessThanOrEqual(budget);
      for (const { head } of refused) {
        expect(head).toMatch(/\r\nretry-after: 1\r\n/i);
        expect(head).toContain('"code":"server_busy"');
      }
    },
  );
});
