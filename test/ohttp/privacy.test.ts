import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObliviousFetch, fetchGatewayKeys } from '../../src/client/ohttp-fetch.ts';
import type { KeyConfig } from '../../src/protocol/ohttp.ts';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { waitFor } from '../support/wait-for.ts';

/**
 * Issue 51, privacy stated and tested (docs/ohttp.md, "Correctness"): the client on 127.0.0.2, `sigil
 * ohttp-relay` as a real process on 127.0.0.3, Sigil on 127.0.0.1. Sigil's access log, its /metrics and every byte it
 * received hold no client address; the relay's output and every byte through it hold no prompt, answer, API key or
 * path. gateway.test.ts shows the relay-to-Sigil bytes of one JSON chat; this adds Sigil's own records, the relay's
 * side and a stream, and a relay that forwards X-Forwarded-For to show the address check can fail.
 */
const CLIENT_ADDRESS = '127.0.0.2';
const RELAY_ADDRESS = '127.0.0.3';
const PROMPT = 'the private question about a lump';
const NONCE = 'n-privacy-1';

let engine: TestEngine;
let sigil: TestSigil;
/** The bytes Sigil received and sent: a TCP recorder in front of it, where the relay connects. */
let sigilSide: RecordingProxy;
/** The bytes the relay received and sent on its client side: the client's link, leaving from the client's address. */
let clientSide: RecordingProxy;
let relay: ChildProcess;
let relayOutput = '';
let keys: KeyConfig[];
const clientAgent = new Agent({ localAddress: CLIENT_ADDRESS });
const fromClient = ((input: string, init?: object) => undiciFetch(input, { ...init, dispatcher: clientAgent })) as unknown as typeof fetch;

/** `sigil ohttp-relay` in a child process, listening on RELAY_ADDRESS; resolves with its URL once it says where it listens. */
async function startRelayProcess(gateway: string): Promise<string> {
  relay = spawn(process.execPath, [...SIGIL_FROM_SOURCES, 'ohttp-relay', '--gateway', gateway, '--listen', `${RELAY_ADDRESS}:0`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  relay.stdout!.on('data', (chunk: Buffer) => (relayOutput += chunk.toString('utf8')));
  relay.stderr!.on('data', (chunk: Buffer) => (relayOutput += chunk.toString('utf8')));
  return waitFor('the relay to listen', () => /relaying (http:\/\/\S+) to/.exec(relayOutput)?.[1], { timeoutMs: 60_000 });
}

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
  const { hostname, port } = new URL(sigil.url);
  sigilSide = await startRecordingProxy({ host: hostname, port: Number(port) });
  const relayUrl = new URL(await startRelayProcess(sigilSide.url));
  clientSide = await startRecordingProxy({ host: relayUrl.hostname, port: Number(relayUrl.port) }, 'http', { localAddress: CLIENT_ADDRESS });
  keys = await fetchGatewayKeys(`${clientSide.url}/`, { fetch: fromClient });
}, 90_000);

afterAll(async () => {
  if (relay.exitCode === null) {
    const exited = new Promise((resolve) => relay.once('exit', resolve));
    relay.kill('SIGTERM');
    await exited;
  }
  await clientSide.close();
  await sigilSide.close();
  await sigil.close(0);
  await engine.close();
  await clientAgent.close();
});

const oblivious = (relayUrl: string) => createObliviousFetch({ relayUrl, keys, fetch: fromClient });

/** Where Sigil kept a trace of the client's address: its access log lines, its /metrics text, the bytes it received. */
async function whereSigilSawTheClient(fromLine: number): Promise<string[]> {
  const metrics = await (await fetch(`${sigil.url}/metrics`)).text();
  expect(metrics).toContain('sigil_requests_total');
  const places: string[] = [];
  if (sigil.logs.slice(fromLine).some((line) => line.includes(CLIENT_ADDRESS))) places.push('log');
  if (metrics.includes(CLIENT_ADDRESS)) places.push('metrics');
  if (sigilSide.record().includes(CLIENT_ADDRESS)) places.push('bytes received');
  return places;
}

/** The lines Sigil logged for requests since `from`, once the outer POST and the inner request are both there. */
async function requestLogLines(from: number, routes: string[]): Promise<Array<Record<string, unknown>>> {
  return waitFor('the access log lines of the outer and inner requests', () => {
    const lines = sigil.logs
      .slice(from)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request');
    return routes.every((route) => lines.some((l) => l.route === route)) && lines;
  });
}

describe('client → relay (a real sigil ohttp-relay process) → Sigil, each on its own address', () => {
  it('a JSON chat and a stream: Sigil logs, counts and receives no client address; the relay prints and carries no content', async () => {
    const fromLine = sigil.logs.length;
    sigilSide.forget();
    clientSide.forget();
    const openai = new OpenAI({ baseURL: 'https://sigil.inside/v1', apiKey: sigil.key, fetch: oblivious(`${clientSide.url}/`), maxRetries: 0 });
    const completion = await openai.chat.completions.create(
      { model: 'm', messages: [{ role: 'user', content: PROMPT }] },
      { headers: { 'x-service-receipt': 'true', 'x-service-nonce': NONCE } },
    );
    expect(completion.choices[0]!.message.content).toBe(engine.reply);
    const stream = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }], stream: true });
    let streamed = '';
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? '';
    expect(streamed).toBe(engine.reply);

    // Sigil did serve and log both requests, so the absence below is of the address, not of the lines.
    const lines = await requestLogLines(fromLine, ['/.well-known/ohttp-gateway', '/v1/chat/completions']);
    expect(lines.filter((l) => l.route === '/v1/chat/completions').map((l) => l.status)).toEqual([200, 200]);
    expect(await whereSigilSawTheClient(fromLine)).toEqual([]);
    // What Sigil's process does see is the relay's connection: it came to Sigil's side recorder, not from the client.
    expect(sigilSide.record()).toContain('content-type: message/ohttp-chunked-req');

    const throughRelay = clientSide.record() + sigilSide.record();
    expect(clientSide.record()).toContain('message/ohttp-chunked-req');
    for (const secret of [PROMPT, engine.reply, sigil.key, NONCE, 'chat/completions', 'authorization', 'x-service-receipt']) {
      expect(throughRelay).not.toContain(secret);
      expect(relayOutput).not.toContain(secret);
    }
    expect(relayOutput).not.toContain(CLIENT_ADDRESS);
    expect(sigilSide.record().toLowerCase()).not.toContain('x-forwarded-for');
  });

  it('a relay that forwards X-Forwarded-For is caught: the client address shows in what Sigil received', async () => {
    // A variant relay: the body and its content type, as sigil ohttp-relay forwards, plus the client's address.
    const leaky: Server = createServer((req, res) => {
      const out = httpRequest(
        `${sigilSide.url}/.well-known/ohttp-gateway`,
        { method: 'POST', headers: { 'content-type': req.headers['content-type']!, 'x-forwarded-for': req.socket.remoteAddress! } },
        (answer) => {
          res.writeHead(answer.statusCode!, { 'content-type': answer.headers['content-type']! });
          answer.pipe(res);
        },
      );
      req.pipe(out);
    });
    await new Promise<void>((resolve) => leaky.listen(0, RELAY_ADDRESS, resolve));
    try {
      const fromLine = sigil.logs.length;
      sigilSide.forget();
      const openai = new OpenAI({
        baseURL: 'https://sigil.inside/v1',
        apiKey: sigil.key,
        fetch: oblivious(`http://${RELAY_ADDRESS}:${(leaky.address() as AddressInfo).port}/`),
        maxRetries: 0,
      });
      const completion = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] });
      expect(completion.choices[0]!.message.content).toBe(engine.reply);
      await requestLogLines(fromLine, ['/.well-known/ohttp-gateway', '/v1/chat/completions']);
      expect(await whereSigilSawTheClient(fromLine)).toEqual(['bytes received']);
    } finally {
      leaky.closeAllConnections();
      await new Promise<void>((resolve) => leaky.close(() => resolve()));
    }
  });
});
