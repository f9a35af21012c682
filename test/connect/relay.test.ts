import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { AttestedFetch } from '../../src/client/index.ts';
import { relay, sendError } from '../../src/connect/relay.ts';
import { toHttpError } from '../../src/protocol/errors.ts';

/** The relay step alone, behind an attested fetch that answers what a tampering relay on the way could make it answer. */
const servers: Server[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

async function relayAnswering(answer: () => Response, maxAnswerBytes?: number): Promise<string> {
  const fetch = (async () => answer()) as unknown as AttestedFetch;
  const target = { fetch, origin: 'https://inference.example', requireSealedBodies: false, ...(maxAnswerBytes === undefined ? {} : { maxAnswerBytes }) };
  const server = createServer((req, res) => {
    relay(target, req, res).catch((err: unknown) => sendError(res, toHttpError(err)));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('the relay passes on only what it can hand over as the API answers', () => {
  it('refuses an answer that is neither JSON nor an event stream', async () => {
    const base = await relayAnswering(() => new Response('<html>models</html>', { headers: { 'content-type': 'text/html' } }));
    const answer = await fetch(`${base}/v1/models`);
    expect(answer.status).toBe(502);
    expect(await answer.json()).toEqual({
      error: {
        code: 'upstream_bad_response',
        type: 'upstream_error',
        param: null,
        message: 'sigil connect did not pass this answer on: it came as text/html, neither JSON nor an event stream.',
      },
    });
  });

  it('drops every CORS header of the answer', async () => {
    const cors = { 'access-control-allow-origin': '*', 'access-control-allow-headers': '*', 'content-type': 'application/json' };
    const base = await relayAnswering(() => new Response('{"data":[]}', { headers: cors }));
    const answer = await fetch(`${base}/v1/models`);
    expect(answer.status).toBe(200);
    expect([...answer.headers.keys()].filter((h) => h.startsWith('access-control-'))).toEqual([]);
    expect(await answer.text()).toBe('{"data":[]}');
  });

  it('refuses a JSON answer of 100 MB streamed without a length, once it passes the cap', async () => {
    const chunk = new Uint8Array(1024 * 1024).fill(0x20);
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += 1;
        if (pulled > 100) controller.close();
        else controller.enqueue(chunk);
      },
    });
    const base = await relayAnswering(() => new Response(body, { headers: { 'content-type': 'application/json' } }), 4 * 1024 * 1024);
    const answer = await fetch(`${base}/v1/models`);
    expect(answer.status).toBe(502);
    expect(((await answer.json()) as { error: { message: string } }).error.message).toBe(
      "sigil connect did not pass this answer on: the service's answer is larger than 4 MiB, the most accepted (sigil connect --max-answer-mib raises the cap).",
    );
    expect(pulled).toBeLessThan(10);
  });
});
