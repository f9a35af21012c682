import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { DhkemX25519HkdfSha256 } from '@hpke/core';
import { describe, expect, it } from 'vitest';
import { encapsulateRequest } from '../../src/client/ohttp-encapsulate.ts';
import { GatewayRefusal, ObliviousGateway } from '../../src/ohttp/gateway.ts';
import { encodeKeyConfig, encodeKeyConfigs, parseKeyConfigs, ResponseAead, type KeyConfig } from '../../src/protocol/ohttp.ts';

const vector = JSON.parse(readFileSync(new URL('../vectors/ohttp/rfc9458-appendix-a.json', import.meta.url), 'utf8')) as Record<string, string>;
const hex = (name: string) => Buffer.from(vector[name]!, 'hex');

function x25519Private(d: Buffer, x: Uint8Array): KeyObject {
  return createPrivateKey({ key: { kty: 'OKP', crv: 'X25519', d: d.toString('base64url'), x: Buffer.from(x).toString('base64url') }, format: 'jwk' });
}

const [rfcConfig] = parseKeyConfigs(Buffer.concat([Buffer.of(0, hex('key_config').length), hex('key_config')]));
const rfcGateway = new ObliviousGateway(x25519Private(hex('gateway_private_key'), rfcConfig!.publicKey), hex('key_config'));

async function rfcEphemeral(): Promise<CryptoKeyPair> {
  const kem = new DhkemX25519HkdfSha256();
  return {
    privateKey: await kem.importKey('raw', new Uint8Array(hex('client_ephemeral_private_key')).buffer, false),
    publicKey: await kem.importKey('raw', new Uint8Array(hex('client_ephemeral_public_key')).buffer, true),
  };
}

describe('Oblivious HTTP: RFC 9458 Appendix A, byte for byte', () => {
  it('reads the example key configuration: key 1, X25519, HKDF-SHA256 with AES-128-GCM and ChaCha20-Poly1305', () => {
    expect(rfcConfig).toMatchObject({
      keyId: 1,
      kemId: 0x20,
      algorithms: [
        { kdfId: 1, aeadId: 1 },
        { kdfId: 1, aeadId: 3 },
      ],
    });
    expect(Buffer.from(encodeKeyConfig(rfcConfig!)).toString('hex')).toBe(vector.key_config);
  });

  it('the client seals the example request to exactly the published encapsulated request', async () => {
    const sealed = await encapsulateRequest([rfcConfig!], hex('request'), 'whole', await rfcEphemeral());
    expect(Buffer.from(sealed.body).toString('hex')).toBe(vector.encapsulated_request);
  });

  it('the client opens the published encapsulated response to the example response', async () => {
    const sealed = await encapsulateRequest([rfcConfig!], hex('request'), 'whole', await rfcEphemeral());
    expect(Buffer.from(await sealed.openResponse(hex('encapsulated_response'))).toString('hex')).toBe(vector.response);
  });

  it('the gateway opens the published encapsulated request to the example request', () => {
    const opened = rfcGateway.open(hex('encapsulated_request'), 'whole');
    expect(Buffer.from(opened.request).toString('hex')).toBe(vector.request);
    expect(Buffer.from(opened.enc).toString('hex')).toBe(vector.client_ephemeral_public_key);
  });

  it('the response AEAD, given the published secret and nonce, seals the example response to the published bytes', () => {
    const nonce = hex('encapsulated_response').subarray(0, 16);
    const aead = new ResponseAead(1, hex('response_secret'), hex('client_ephemeral_public_key'), nonce);
    expect(Buffer.concat([nonce, aead.seal(hex('response'), false)]).toString('hex')).toBe(vector.encapsulated_response);
  });

  it("the gateway's response to the example request opens on the client's side", async () => {
    const sealed = await encapsulateRequest([rfcConfig!], hex('request'), 'whole', await rfcEphemeral());
    const opened = rfcGateway.open(sealed.body, 'whole');
    expect(Buffer.from(await sealed.openResponse(opened.response.whole(hex('response')))).toString('hex')).toBe(vector.response);
  });
});

describe("Oblivious HTTP with Sigil's key configuration (EHBP's key: X25519, HKDF-SHA256, AES-256-GCM)", () => {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
  const config: KeyConfig = { keyId: 0, kemId: 0x20, publicKey: raw, algorithms: [{ kdfId: 1, aeadId: 2 }] };
  const gateway = new ObliviousGateway(privateKey, encodeKeyConfig(config));
  const request = Buffer.from('a binary HTTP request');

  it('a chunked request and a chunked response, opened chunk by chunk in order, the final one last', async () => {
    const sealed = await encapsulateRequest(parseKeyConfigs(encodeKeyConfigs([config])), request, 'chunked');
    const opened = gateway.open(sealed.body, 'chunked');
    expect(Buffer.from(opened.request).toString()).toBe('a binary HTTP request');
    const body = Buffer.concat([
      opened.response.start(),
      opened.response.chunk(Buffer.from('one ')),
      opened.response.chunk(Buffer.from('two ')),
      opened.response.final(Buffer.from('end')),
    ]);
    const reader = await sealed.chunkedResponse();
    const pieces: string[] = [];
    for (const byte of body) for (const piece of await reader.push(Buffer.of(byte))) pieces.push(Buffer.from(piece).toString());
    pieces.push(Buffer.from(reader.end()).toString());
    expect(pieces).toEqual(['one ', 'two ', 'end']);
  });

  it('a chunked response cut before its final chunk is an error, never a short answer', async () => {
    const sealed = await encapsulateRequest([config], request, 'chunked');
    const opened = gateway.open(sealed.body, 'chunked');
    const reader = await sealed.chunkedResponse();
    await reader.push(Buffer.concat([opened.response.start(), opened.response.chunk(Buffer.from('one '))]));
    expect(() => reader.end()).toThrow(/cut before its final chunk/);
  });

  it('two chunks swapped by a relay do not open', async () => {
    const sealed = await encapsulateRequest([config], request, 'chunked');
    const opened = gateway.open(sealed.body, 'chunked');
    const start = opened.response.start();
    const first = opened.response.chunk(Buffer.from('one '));
    const second = opened.response.chunk(Buffer.from('two '));
    const reader = await sealed.chunkedResponse();
    await expect(reader.push(Buffer.concat([start, second, first]))).rejects.toThrow(/altered, reordered or cut/);
  });

  it('a request sealed as whole is not opened as chunked (the info labels differ), nor with one byte changed', async () => {
    const sealed = await encapsulateRequest([config], request, 'whole');
    expect(() => gateway.open(sealed.body, 'chunked')).toThrow(GatewayRefusal);
    const tampered = Buffer.from(sealed.body);
    tampered[tampered.length - 1]! ^= 1;
    expect(() => gateway.open(tampered, 'whole')).toThrow('The encapsulated request could not be opened.');
  });

  it('a request to another key ID or AEAD is refused as a key-configuration problem', async () => {
    const other: KeyConfig = { ...config, keyId: 7, algorithms: [{ kdfId: 1, aeadId: 1 }] };
    const sealed = await encapsulateRequest([other], request, 'whole');
    let refusal: unknown;
    try {
      gateway.open(sealed.body, 'whole');
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(GatewayRefusal);
    expect((refusal as GatewayRefusal).keyConfig).toBe(true);
  });

  it('a key configuration list with an encoding error is discarded whole', () => {
    const list = Buffer.from(encodeKeyConfigs([config, config]));
    expect(parseKeyConfigs(list)).toHaveLength(2);
    expect(() => parseKeyConfigs(list.subarray(0, list.length - 1))).toThrow(/longer than the list holds/);
  });
});
