import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeModel } from '../../packages/engine/src/model/make-model.ts';
import { startEngine, type RunningEngine } from '../../packages/engine/src/server/start-engine.ts';
import { splitReceiptStream } from '../../src/verify/index.ts';
import { expectVerifiedReceipt } from '../support/receipts.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/**
 * Issue 16 item 5: tool calling and structured output through Sigil to a real engine (the built-in
 * llama.cpp one). Between Sigil and the engine sits a recorder, so the test sees both sides of the
 * relay: the engine gets the client's tools, tool_choice, response_format and tool messages as sent
 * (only `model` mapped to the engine's name), the client gets the engine's bytes (only `model`
 * mapped back), and every answer carries a receipt the client verifies over the exact bytes.
 */
const SENTENCE = 'Receipts prove which enclave served you.';
const CATALOGUE_ID = 'weather-assistant';
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
const weather: OpenAI.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather now in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Lyon'] }, metric: { type: 'boolean' } },
      required: ['city', 'metric'],
    },
  },
};

interface Exchange {
  requestBytes: Buffer;
  response: Response;
}

let dir: string;
let engine: RunningEngine;
let recorder: Server;
/** What the engine was sent and answered, one entry per request. */
const engineSide: Array<{ request: Buffer; response: Buffer }> = [];
let sigil: TestSigil;
const clientSide: Exchange[] = [];
let client: OpenAI;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sigil-tools-'));
  await makeModel({ out: join(dir, 'scripted.gguf'), scripted: SENTENCE });
  engine = await startEngine({ host: '127.0.0.1', port: 0, threads: 1, modelPath: join(dir, 'scripted.gguf'), parallel: 2, contextSize: 1024, maxQueued: 4 });
  recorder = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request = Buffer.concat(chunks);
    const upstream = await fetch(`${engine.url}${req.url}`, {
      method: req.method,
      headers: { 'content-type': 'application/json' },
      ...(req.method === 'POST' ? { body: request } : {}),
    });
    res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
    const answered: Buffer[] = [];
    for await (const chunk of upstream.body as unknown as AsyncIterable<Uint8Array>) {
      answered.push(Buffer.from(chunk));
      res.write(chunk);
    }
    res.end();
    if (req.method === 'POST') engineSide.push({ request, response: Buffer.concat(answered) });
  });
  await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
  const recorderUrl = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}/v1`;
  sigil = await startTestSigil({
    upstreams: { engine: { url: recorderUrl } },
    models: [{ id: CATALOGUE_ID, upstream_model: 'scripted', context_window: 1024 }],
  });
  const recording: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    clientSide.push({ requestBytes: Buffer.from(String(init?.body ?? '')), response: response.clone() });
    return response;
  };
  client = new OpenAI({
    baseURL: `${sigil.url}/v1`,
    apiKey: sigil.key,
    maxRetries: 0,
    fetch: recording,
    defaultHeaders: { 'x-service-receipt': 'true', 'x-service-nonce': 'tools-1' },
  });
}, 120_000);

afterAll(async () => {
  await sigil?.close();
  recorder?.close();
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

/**
 * Both sides of the last exchange: the engine received the client's body with only the model
 * renamed, and the client received the engine's bytes with only the model renamed back; then the
 * receipt verifies over the bytes the client sent and received.
 */
async function checkLastExchange(stream: boolean): Promise<{ sent: Record<string, unknown> }> {
  const exchange = clientSide.at(-1)!;
  const { request: engineRequest, response: engineResponse } = engineSide.at(-1)!;
  const sent = JSON.parse(exchange.requestBytes.toString('utf8')) as Record<string, unknown>;
  expect(JSON.parse(engineRequest.toString('utf8'))).toEqual({ ...sent, model: 'scripted' });

  const received = Buffer.from(await exchange.response.arrayBuffer());
  let responseBytes: Uint8Array = received;
  let jws = exchange.response.headers.get('x-service-receipt')!;
  if (stream) {
    const split = splitReceiptStream(received);
    responseBytes = split.body;
    jws = split.receipt;
  }
  expect(Buffer.from(responseBytes).toString('utf8')).toBe(engineResponse.toString('utf8').replaceAll('"model":"scripted"', `"model":"${CATALOGUE_ID}"`));

  const { claims } = await expectVerifiedReceipt(sigil.url, jws, {
    nonce: 'tools-1',
    requestBytes: exchange.requestBytes,
    responseBytes,
    receiptType: 'message',
    modelId: CATALOGUE_ID,
  });
  expect(claims?.selected_model.model_id).toBe(CATALOGUE_ID);
  return { sent };
}

function weatherArguments(text: string): { city: string; metric: boolean } {
  const args = JSON.parse(text) as { city: string; metric: boolean };
  expect(['Paris', 'Lyon']).toContain(args.city);
  expect(typeof args.metric).toBe('boolean');
  return args;
}

describe('tools and structured output through Sigil to the built-in engine', () => {
  it('response_format json_schema: JSON of the schema, relayed unchanged, with a verified receipt', async () => {
    const schema = {
      type: 'object',
      properties: { answer: { enum: ['yes', 'no'] }, confidence: { enum: ['low', 'high'] } },
      required: ['answer', 'confidence'],
      additionalProperties: false,
    };
    const completion = await client.chat.completions.create({
      model: CATALOGUE_ID,
      messages,
      temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'verdict', schema, strict: true } },
    });
    expect(completion.model).toBe(CATALOGUE_ID);
    const verdict = JSON.parse(completion.choices[0]!.message.content!) as Record<string, string>;
    expect(['yes', 'no']).toContain(verdict.answer);
    expect(['low', 'high']).toContain(verdict.confidence);
    const { sent } = await checkLastExchange(false);
    expect(sent.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'verdict', schema, strict: true } });
  });

  it('a named tool choice, streamed: the call arrives in deltas that add up to valid arguments, stream receipt verified', async () => {
    const stream = await client.chat.completions.create({
      model: CATALOGUE_ID,
      messages,
      temperature: 0,
      tools: [weather],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      stream: true,
    });
    let name = '';
    let args = '';
    for await (const chunk of stream) {
      for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
    }
    expect(name).toBe('get_weather');
    weatherArguments(args);
    const { sent } = await checkLastExchange(true);
    expect(sent.tools).toEqual([weather]);
  });

  it('a whole tool round trip: "required" call, the tool result sent back, an answer in words; each step receipted', async () => {
    const first = await client.chat.completions.create({
      model: CATALOGUE_ID,
      messages,
      temperature: 0,
      tools: [weather],
      tool_choice: 'required',
      parallel_tool_calls: false,
    });
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    const call = first.choices[0]!.message.tool_calls![0]!;
    if (call.type !== 'function') throw new Error('not a function call');
    const { city } = weatherArguments(call.function.arguments);
    await checkLastExchange(false);

    const followUp: OpenAI.ChatCompletionMessageParam[] = [
      ...messages,
      first.choices[0]!.message,
      { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ city, temperature_c: 21 }) },
    ];
    const answer = await client.chat.completions.create({ model: CATALOGUE_ID, messages: followUp, temperature: 0, tools: [weather], tool_choice: 'none' });
    expect(answer.choices[0]!.finish_reason).toBe('stop');
    expect(typeof answer.choices[0]!.message.content).toBe('string');
    const { sent } = await checkLastExchange(false);
    // The engine saw the assistant's call and the tool's answer exactly as the client sent them.
    expect((sent.messages as unknown[]).slice(1)).toEqual(JSON.parse(JSON.stringify(followUp.slice(1))));
  });

  it('the engine refusing a schema it cannot enforce reaches the client as its OpenAI-shaped 400', async () => {
    const odd: OpenAI.ChatCompletionTool = {
      type: 'function',
      function: { name: 'pick', parameters: { type: 'object', properties: { n: { type: 'integer', multipleOf: 5 } } } },
    };
    const error = await client.chat.completions.create({ model: CATALOGUE_ID, messages, tools: [odd] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tools[0].function.parameters.properties.n.multipleOf');
    expect((error as Error).message).toContain('multipleOf');
  });
});
