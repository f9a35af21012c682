import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttestationError, createAttestedFetch, fetchGatewayKeys, ObliviousRelayError } from '../../src/client/index.ts';
import { encapsulateRequest } from '../../src/client/ohttp-encapsulate.ts';
import { startObliviousRelay, type RunningRelay } from '../../src/cli/ohttp-relay.ts';
import { ObliviousGateway } from '../../src/ohttp/gateway.ts';
import {
  CHUNKED_REQUEST_MEDIA_TYPE,
  CHUNKED_RESPONSE_MEDIA_TYPE,
  encodeKeyConfig,
  encodeKeyConfigs,
  KEYS_MEDIA_TYPE,
  type KeyConfig,
} from '../../src/protocol/ohttp.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import type { TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { RELAY_EGRESS, startRelayedSigil, type RelayedSigil } from '../support/relayed-sigil.ts';

/**
 * Issue 51: the attested client through an Oblivious HTTP relay. The client reaches only the relay (listening on
 * 127.0.0.2); the relay reaches Sigil from 127.0.0.3 through a recording proxy: every byte Sigil's socket received is
 * in its record, so the test can show that nothing but sealed gateway requests ever reached the service.
 */
const SERVICE = 'https://sigil.inside/v1';
const PROMPT = 'the secret question about a rash';

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

/** The request lines that reached Sigil's socket: method and path. */
function requestsSeen(record: string): string[] {
  return [...record.matchAll(/^(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) (\S+) HTTP\/1\.1\r$/gm)].map((m) => `${m[1]} ${m[2]}`);
}

describe('createAttestedFetch({ ohttpRelay }): every request through the relay, sealed to the attested gateway key', () => {
  it('the openai client gets a JSON and a stream answer with verified receipts, and the service saw only sealed gateway requests', async () => {
    wire.forget();
    const attested = await createAttestedFetch({ baseURL: SERVICE, ohttpRelay: relay.url, allowNoTee: true, apiKey: sigil.key });
    try {
      expect(attested.attestation.checks.filter((c) => c.name === 'attestation.ohttp_key')).toEqual([
        expect.objectContaining({ ok: true, detail: expect.stringContaining('the gateway key the relay served') }),
      ]);
      expect(attested.attestation.checks.find((c) => c.name === 'attestation.tls_key')?.waived).toBe(
        'every request goes through the Oblivious HTTP relay, sealed to the gateway key the attestation binds (attestation.ohttp_key): no connection reaches the service, so there is no TLS key of its to compare',
      );
      const openai = new OpenAI({ baseURL: SERVICE, apiKey: sigil.key, fetch: attested, maxRetries: 0 });
      const completion = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] });
      expect(completion.choices[0]!.message.content).toBe(engine.reply);
      const stream = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }], stream: true });
      let streamed = '';
      for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
      expect(streamed).toBe(engine.reply);
      expect(attested.receipts.map((r) => ({ ok: r.ok, stream: r.stream, path: r.path }))).toEqual([
        { ok: true, stream: false, path: '/v1/chat/completions' },
        { ok: true, stream: true, path: '/v1/chat/completions' },
      ]);
      const record = wire.record();
      const seen = requestsSeen(record);
      // The key configuration (GET), the attestation's documents and both chats (POST): nothing else, nothing in the clear.
      expect(new Set(seen)).toEqual(new Set(['GET /.well-known/ohttp-gateway', 'POST /.well-known/ohttp-gateway']));
      expect(seen.filter((s) => s.startsWith('POST')).length).toBeGreaterThanOrEqual(5);
      for (const secret of [PROMPT, sigil.key, engine.reply, 'chat/completions', 'verify/attestation', 'jwks.json']) expect(record).not.toContain(secret);
    } finally {
      await attested.close();
    }
  });

  it('re-attestation fetches the gateway key through the relay again and checks it again', async () => {
    let now = new Date('2026-12-06T10:00:00Z');
    const attested = await createAttestedFetch({ baseURL: SERVICE, ohttpRelay: relay.url, allowNoTee: true, reattestEvery: 60_000, now: () => now });
    try {
      wire.forget();
      now = new Date(now.getTime() + 61_000);
      const openai = new OpenAI({ baseURL: SERVICE, apiKey: sigil.key, fetch: attested, maxRetries: 0 });
      await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'again' }] });
      expect(attested.renewal.attestedAt).toEqual(now);
      expect(attested.attestation.checks.find((c) => c.name === 'attestation.ohttp_key')).toMatchObject({ ok: true });
      expect(requestsSeen(wire.record()).filter((s) => s === 'GET /.well-known/ohttp-gateway')).toHaveLength(1);
    } finally {
      await attested.close();
    }
  });

  it('a relay that substitutes its own gateway key is refused, naming the check, and no answer is given', async () => {
    const evil = await startKeySubstitutingRelay(`${sigil.url}/.well-known/ohttp-gateway`);
    try {
      const before = engine.requests.length;
      const error = await createAttestedFetch({ baseURL: SERVICE, ohttpRelay: evil.url, allowNoTee: true, apiKey: sigil.key }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AttestationError);
      const failed = (error as AttestationError).checks.filter((c) => !c.ok && c.waived === undefined).map((c) => c.name);
      expect(failed).toEqual(['attestation.ohttp_key']);
      expect((error as Error).message).toContain('attestation.ohttp_key');
      // The substituted key did open what was sealed to it: the attestation's public documents, never the API key.
      expect(evil.opened()).toMatch(/GET|verify/);
      expect(evil.opened()).not.toContain(sigil.key);
      expect(engine.requests.length).toBe(before);
    } finally {
      await evil.close();
    }
  });

  it('a relay that cannot be reached is a clear error naming the relay', async () => {
    const gone = await startObliviousRelay({ gateway: wire.url, host: '127.0.0.2', port: 0 });
    await gone.close();
    const error = await createAttestedFetch({ baseURL: SERVICE, ohttpRelay: gone.url, allowNoTee: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ObliviousRelayError);
    expect((error as Error).message).toBe(`the Oblivious HTTP relay ${gone.url} could not be reached: ECONNREFUSED`);
  });
});

describe('the transparency log through the relay', () => {
  let logged: TestSigil;
  let logWire: RecordingProxy;
  let logRelay: RunningRelay;
  beforeAll(async () => {
    logged = await startTestSigil({
      upstreams: { e: { url: engine.baseUrl } },
      models: [{ id: 'm' }],
      config: { transparency_log: { dir: mkdtempSync(join(tmpdir(), 'sigil-tlog-ohttp-')), batch_ms: 50 } },
    });
    const { hostname, port } = new URL(logged.url);
    logWire = await startRecordingProxy({ host: hostname, port: Number(port) });
    logRelay = await startObliviousRelay({ gateway: logWire.url, host: '127.0.0.2', port: 0, localAddress: RELAY_EGRESS });
  });
  afterAll(async () => {
    await logRelay.close();
    await logWire.close();
    await logged.close(0);
  });

  it("each receipt is proven in the service's log, whose checkpoints, tiles and proofs come through the relay too", async () => {
    logWire.forget();
    const attested = await createAttestedFetch({ baseURL: SERVICE, ohttpRelay: logRelay.url, allowNoTee: true });
    try {
      const openai = new OpenAI({ baseURL: SERVICE, apiKey: logged.key, fetch: attested, maxRetries: 0 });
      await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] });
      const verdict = (await attested.receipts.at(-1)!.inclusion)!;
      expect(verdict.checks.map((c) => `${c.ok ? 'PASS' : 'FAIL'} ${c.name}`)).toEqual(['PASS log.checkpoint', 'PASS log.consistency', 'PASS log.inclusion']);
      expect(new Set(requestsSeen(logWire.record()))).toEqual(new Set(['GET /.well-known/ohttp-gateway', 'POST /.well-known/ohttp-gateway']));
    } finally {
      await attested.close();
    }
  });
});

/**
 * A relay that lies: it serves its own key configuration, opens what clients seal to it, seals it again to the real
 * gateway and the answers back to the client. Only the attestation's binding of the real key can reveal it.
 */
async function startKeySubstitutingRelay(gatewayUrl: string): Promise<{ url: string; opened(): string; close(): Promise<void> }> {
  const { publicKey, privateKey } = generateKeyPairSync('x25519');
  const real = await fetchGatewayKeys(gatewayUrl);
  const own: KeyConfig = { ...real[0]!, publicKey: new Uint8Array(Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url')) };
  const gateway = new ObliviousGateway(privateKey as KeyObject, encodeKeyConfig(own));
  const opened: Buffer[] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': KEYS_MEDIA_TYPE });
        res.end(Buffer.from(encodeKeyConfigs([own])));
        return;
      }
      const pieces: Buffer[] = [];
      for await (const piece of req) pieces.push(piece as Buffer);
      const request = gateway.open(Buffer.concat(pieces), 'chunked');
      opened.push(Buffer.from(request.request));
      const resealed = await encapsulateRequest(real, request.request, 'chunked');
      const answer = await fetch(gatewayUrl, { method: 'POST', headers: { 'content-type': CHUNKED_REQUEST_MEDIA_TYPE }, body: Buffer.from(resealed.body) });
      const opener = await resealed.chunkedResponse();
      const inner = [...(await opener.push(new Uint8Array(await answer.arrayBuffer()))), opener.end()];
      res.writeHead(200, { 'content-type': CHUNKED_RESPONSE_MEDIA_TYPE });
      res.end(Buffer.concat([request.response.start(), request.response.final(Buffer.concat(inner))]));
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
  return {
    url: `http://127.0.0.2:${(server.address() as AddressInfo).port}/`,
    opened: () => Buffer.concat(opened).toString('latin1'),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
