import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startSigilProcess } from '../support/sigil-process.ts';
import { startTestEngine } from '../support/test-engine.ts';
import { hostPort } from '../support/raw-http.ts';
import { killChild } from '../support/kill-child.ts';
import { waitFor } from '../support/wait-for.ts';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()!();
});

describe('shutdown a load balancer can follow (SIGTERM to sigil serve)', () => {
  it(
    'answers /readyz 503 while still serving for shutdown_drain_ms, then closes the listener, and ends a stream cut at the end of the grace with one error event',
    { timeout: 90_000 },
    async () => {
      const engine = await startTestEngine({ modelNames: ['m'] });
      cleanup.push(() => engine.close());
      engine.reply = Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ');
      const sigil = await startSigilProcess(engine.baseUrl, { limits: { shutdown_drain_ms: 2000, shutdown_grace_ms: 1000 } });
      cleanup.push(() => killChild(sigil.child));
      const chat = (stream: boolean) =>
        fetch(`${sigil.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream }),
        });
      expect((await fetch(`${sigil.url}/readyz`)).status).toBe(200);

      engine.behaviour = { chunkDelayMs: 200 };
      const stream = await chat(true);
      const streamed = stream.text();
      await waitFor('the stream at the engine', () => engine.requests.some((r) => r.path === '/v1/chat/completions'));
      engine.behaviour = {};

      const signalled = Date.now();
      sigil.child.kill('SIGTERM');
      await waitFor('the drain begun', () => sigil.logs.some((l) => l.msg === 'shutting down: /readyz answers 503 while load balancers move on'));
      const readyz = await fetch(`${sigil.url}/readyz`);
      expect(readyz.status).toBe(503);
      expect(await readyz.json()).toEqual({ error: { message: 'Not ready: shutting down.', type: 'service_unavailable', param: null, code: 'not_ready' } });
      // Still served meanwhile, each answer the connection's last.
      const served = await chat(false);
      expect(served.status).toBe(200);
      expect(served.headers.get('connection')).toBe('close');

      // Once the window is over, the listener is closed.
      const refusedAt = await waitFor('the listener closed', () =>
        fetch(`${sigil.url}/healthz`).then(
          () => false as const,
          () => Date.now(),
        ),
      );
      expect(refusedAt - signalled).toBeGreaterThanOrEqual(2000);

      // The stream outlived drain + grace: it ends with exactly one error event, no [DONE].
      const text = await streamed;
      expect(text).not.toContain('[DONE]');
      expect(text.match(/^data: \{"error"/gm)).toHaveLength(1);
      expect(
        text.endsWith(
          'data: {"error":{"message":"Sigil is shutting down: this stream was cut when the shutdown grace period ended; retry the request.","type":"service_unavailable","param":null,"code":"not_ready"}}\n\n',
        ),
      ).toBe(true);
      expect(await sigil.exited).toBe(0);
      // The log says what the shutdown waited for.
      expect(sigil.logs).toContainEqual(
        expect.objectContaining({ msg: 'shutting down: waiting up to 1000 ms for 1 request(s) in flight to finish', in_flight: 1, grace_ms: 1000 }),
      );
    },
  );

  it('closes a spare connection that sent nothing quietly: no 408, no warning', { timeout: 60_000 }, async () => {
    const engine = await startTestEngine({ modelNames: ['m'] });
    cleanup.push(() => engine.close());
    const sigil = await startSigilProcess(engine.baseUrl, { limits: { headers_timeout_ms: 500 } });
    cleanup.push(() => killChild(sigil.child));
    // A client's pool opens a connection ahead of need and sends nothing on it.
    const from = sigil.logs.length;
    const socket = connect(hostPort(sigil.url));
    cleanup.push(async () => socket.destroy());
    let received = '';
    socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
    socket.on('error', () => undefined);
    await new Promise<void>((r) => socket.once('close', () => r()));
    expect(received).toBe('');
    // A request after it: its log line comes after anything logged for the spare connection.
    expect((await fetch(`${sigil.url}/healthz`)).status).toBe(200);
    await waitFor('the later request logged', () => sigil.logs.slice(from).some((l) => l.msg === 'request' && l.route === '/healthz'));
    expect(sigil.logs.slice(from).filter((l) => (l.level as number) >= 40)).toEqual([]);
  });
});
