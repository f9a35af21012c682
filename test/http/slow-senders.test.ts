import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine } from '../support/test-engine.ts';
import { hostPort } from '../support/raw-http.ts';
import { waitFor } from '../support/wait-for.ts';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()!();
});

const SLOW_SENDERS = 1100;

/** Opens a chat request that announces a 1,000-byte body and sends one byte of it, then one more every second. */
function slowSender(sigil: TestSigil): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect(hostPort(sigil.url), () => {
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${sigil.key}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{`,
      );
      const drip = setInterval(() => socket.writable && socket.write(' '), 1000);
      socket.once('close', () => clearInterval(drip));
      resolve(socket);
    });
    socket.on('error', () => undefined);
  });
}

describe('slow request bodies', () => {
  it('1,100 clients sending bodies slowly do not keep others from being served', { timeout: 60_000 }, async () => {
    const engine = await startTestEngine({ modelNames: ['m'] });
    cleanup.push(() => engine.close());
    const sigil = await startTestSigil({
      upstreams: { main: { url: engine.baseUrl } },
      models: [{ id: 'm' }],
      config: { limits: { max_concurrent: 1024, max_concurrent_per_key: 4096, body_timeout_ms: 30_000 } },
    });
    cleanup.push(() => sigil.close(0));

    const senders: Socket[] = [];
    cleanup.push(async () => senders.forEach((s) => s.destroy()));
    // In batches, so the listen backlog never overflows into SYN retries.
    for (let i = 0; i < SLOW_SENDERS; i += 100)
      senders.push(...(await Promise.all(Array.from({ length: Math.min(100, SLOW_SENDERS - i) }, () => slowSender(sigil)))));
    await waitFor('every slow sender in flight', () => sigil.state.inFlight.count === SLOW_SENDERS);

    const statuses = await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`${sigil.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${sigil.otherKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
        }).then(async (res) => [res.status, (await res.json()) as { choices?: unknown[] }] as const),
      ),
    );
    expect(statuses.map(([status]) => status)).toEqual(Array(20).fill(200));
    expect(statuses.every(([, body]) => body.choices?.length === 1)).toBe(true);
    // The slow senders were still there, holding their connections, while the others were served.
    expect(senders.filter((s) => !s.destroyed).length).toBe(SLOW_SENDERS);
  });
});
