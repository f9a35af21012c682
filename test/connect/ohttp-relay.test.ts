import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startObliviousRelay, type RunningRelay } from '../../src/cli/ohttp-relay.ts';
import type { ConnectStatus } from '../../src/connect/status.ts';
import type { RecordingProxy } from '../support/recording-proxy.ts';
import type { TestEngine } from '../support/test-engine.ts';
import type { TestSigil } from '../support/sigil.ts';
import { startRelayedSigil, type RelayedSigil } from '../support/relayed-sigil.ts';
import { sigilConnect } from '../support/connect-command.ts';

/**
 * Issue 51: `sigil connect --ohttp-relay URL`. The service is named by a URL connect never contacts; the relay, on its
 * own loopback address, reaches Sigil through a recording proxy that shows what the service received.
 */
let engine: TestEngine;
let sigil: TestSigil;
let wire: RecordingProxy;
let relay: RunningRelay;

let chain: RelayedSigil;

beforeAll(async () => {
  chain = await startRelayedSigil();
  ({ engine, sigil, wire, relay } = chain);
});

afterAll(async () => {
  await chain.close();
});

describe('sigil connect --ohttp-relay URL', () => {
  it('answers the openai client through the relay, and /status and the status page say a relay is used', async () => {
    wire.forget();
    let status: ConnectStatus | undefined;
    let page = '';
    let answer: string | null = null;
    const run = await sigilConnect(['https://sigil.inside', '--ohttp-relay', relay.url, '--allow-no-tee', '--listen', '127.0.0.1:0'], async (running) => {
      const openai = new OpenAI({ baseURL: `${running.url}/v1`, apiKey: sigil.key, maxRetries: 0 });
      const completion = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hello through the relay' }] });
      answer = completion.choices[0]!.message.content;
      status = (await (await fetch(`${running.url}/status`)).json()) as ConnectStatus;
      page = await (await fetch(`${running.url}/`)).text();
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(answer).toBe(engine.reply);
    expect(status!.relay).toEqual({
      url: relay.url,
      meaning: `every request goes through the Oblivious HTTP relay ${relay.url}, sealed to the attested gateway key: the service sees the relay's address, not yours, and the relay sees your address, not what you ask`,
    });
    expect(status!.bodies).toBe('sealed (Oblivious HTTP)');
    expect(status!.tls).toBe('not used: the relay carries every request, sealed to the attested key');
    expect(status!.receipts.verified).toBe(1);
    expect(status!.checks.find((c) => c.name === 'attestation.ohttp_key')?.result).toBe('PASS');
    expect(page).toContain('the service sees the relay&#39;s address, not yours');
    const seen = [...wire.record().matchAll(/^(GET|POST|PUT|DELETE|HEAD) (\S+) HTTP\/1\.1\r$/gm)].map((m) => `${m[1]} ${m[2]}`);
    expect(new Set(seen)).toEqual(new Set(['GET /.well-known/ohttp-gateway', 'POST /.well-known/ohttp-gateway']));
  });

  it('a relay that cannot be reached: exit 1, naming the relay, and nothing served', async () => {
    const gone = await startObliviousRelay({ gateway: wire.url, host: '127.0.0.2', port: 0 });
    await gone.close();
    let served = false;
    const run = await sigilConnect(['https://sigil.inside', '--ohttp-relay', gone.url, '--allow-no-tee', '--listen', '127.0.0.1:0'], async () => {
      served = true;
    });
    expect(run.code).toBe(1);
    expect(served).toBe(false);
    expect(run.stderr).toBe(
      `sigil connect: could not reach or verify https://sigil.inside: the Oblivious HTTP relay ${gone.url} could not be reached: ECONNREFUSED\n`,
    );
  });

  it('a relay URL that is not an http(s) URL is a usage error', async () => {
    const run = await sigilConnect(['https://sigil.inside', '--ohttp-relay', 'relay.example.net', '--allow-no-tee'], async () => undefined);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /^sigil connect: --ohttp-relay takes the relay's URL, e\.g\. https:\/\/relay\.example\.net\/sigil\/; not "relay\.example\.net"\n/,
    );
  });

  it('without it, /status says no relay is used and the service sees your address', async () => {
    let status: ConnectStatus | undefined;
    const run = await sigilConnect([sigil.url, '--allow-no-tee', '--allow-insecure-http', '--listen', '127.0.0.1:0'], async (running) => {
      status = (await (await fetch(`${running.url}/status`)).json()) as ConnectStatus;
    });
    expect(run.code).toBe(0);
    expect(status!.relay).toEqual({
      url: 'none',
      meaning: 'no relay: the service sees your address (--ohttp-relay URL sends every request through an Oblivious HTTP relay instead)',
    });
  });
});
