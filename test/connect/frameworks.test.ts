import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, streamText } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConnect, type RunningConnect } from '../../src/connect/start.ts';
import { engineAndSigil } from '../support/engine-and-sigil.ts';

/**
 * The two most used JS frameworks, with their defaults, through sigil connect to a real Sigil (TLS in the enclave,
 * sealed bodies): each answer reaches the app only after its receipt verified, and connect's status lists it.
 */
const both = engineAndSigil({ modelNames: ['m'], models: [{ id: 'm' }], config: { tls: { mode: 'self-signed', hostnames: ['localhost'] } } });
let connect: RunningConnect;

beforeAll(async () => {
  connect = await startConnect({ service: both.sigil.url.replace('127.0.0.1', 'localhost'), listen: { host: '127.0.0.1', port: 0 }, allowNoTee: true });
});
afterAll(async () => connect.close());

const verifiedSince = (before: number) => connect.fetch.receipts.slice(before);

describe('frameworks through sigil connect', () => {
  const provider = () => createOpenAICompatible({ name: 'sigil', baseURL: `${connect.url}/v1`, apiKey: both.sigil.key });

  it("the AI SDK's generateText gets the engine's text, its receipt verified", async () => {
    const before = connect.fetch.receipts.length;
    const result = await generateText({ model: provider()('m'), prompt: 'hello from the AI SDK' });
    expect(result.text).toBe(both.engine.reply);
    expect(verifiedSince(before)).toEqual([expect.objectContaining({ stream: false, ok: true })]);
  });

  it("the AI SDK's streamText gets every delta, the stream's receipt verified before it ends", async () => {
    const before = connect.fetch.receipts.length;
    const result = streamText({ model: provider()('m'), prompt: 'hello again' });
    let text = '';
    for await (const delta of result.textStream) text += delta;
    expect(text).toBe(both.engine.reply);
    expect(verifiedSince(before)).toEqual([expect.objectContaining({ stream: true, ok: true })]);
  });

  it("LangChain's ChatOpenAI invoke gets the engine's text, its receipt verified", async () => {
    const before = connect.fetch.receipts.length;
    const chat = new ChatOpenAI({ model: 'm', apiKey: both.sigil.key, configuration: { baseURL: `${connect.url}/v1` }, maxRetries: 0 });
    const answer = await chat.invoke('hello from LangChain');
    expect(answer.content).toBe(both.engine.reply);
    expect(verifiedSince(before)).toEqual([expect.objectContaining({ stream: false, ok: true })]);
  });
});
