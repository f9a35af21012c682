import { describe, expect, it } from 'vitest';
import type { Attested } from '../../../src/client/attest.ts';
import { prepare } from '../../../src/client/steps/prepare.ts';
import type { ClientContext } from '../../../src/client/steps/stage.ts';
import { brandHeaders } from '../../../src/protocol/brand-headers.ts';

/** The first step of the attested client (src/client/steps/prepare.ts): the app's request read once, before anything is sent. */
const client = { base: new URL('https://inference.example.com/v1'), headerNames: brandHeaders('Acme') } as ClientContext;
const sealing = { hpkeKeyConfig: new Uint8Array([1]) } as Attested;
const clear = { hpkeKeyConfig: null } as Attested;

describe('prepare', () => {
  it('refuses another origin than the attested service, before anything is sent', async () => {
    await expect(prepare(client, clear, 'https://elsewhere.example.com/v1/models', {})).rejects.toMatchObject({
      code: 'ERR_VERIFY_FETCH',
      message: 'this attested fetch talks only to https://inference.example.com, not https://elsewhere.example.com',
    });
  });

  it('asks for identity encoding and, on a POST in the clear, a receipt for a fresh nonce it sends', async () => {
    const prepared = await prepare(client, clear, 'https://inference.example.com/v1/chat/completions', { method: 'post', body: '{"a":1}' });
    expect(prepared).toMatchObject({ method: 'POST', wantsReceipt: true, encrypts: false, ownNonce: undefined });
    expect(prepared.headers.get('accept-encoding')).toBe('identity');
    expect(prepared.headers.get('x-acme-receipt')).toBe('true');
    expect(prepared.nonce).toMatch(/^[0-9a-f]{64}$/);
    expect(prepared.headers.get('x-acme-nonce')).toBe(prepared.nonce);
    expect(new TextDecoder().decode(prepared.body)).toBe('{"a":1}');
  });

  it('sealed, sends no nonce header (both ends derive it), and honours the app’s own nonce as sent', async () => {
    const sealed = await prepare(client, sealing, 'https://inference.example.com/v1/chat/completions', { method: 'POST', body: 'x' });
    expect(sealed.encrypts).toBe(true);
    expect(sealed.headers.get('x-acme-nonce')).toBeNull();
    const own = await prepare(client, sealing, 'https://inference.example.com/v1/chat/completions', {
      method: 'POST',
      body: 'x',
      headers: { 'x-acme-nonce': 'my nonce' },
    });
    expect(own).toMatchObject({ ownNonce: 'my nonce', nonce: 'my nonce' });
  });

  it('through an Oblivious HTTP relay, a body is not sealed again and a fresh nonce goes in the header, inside the relay’s seal', async () => {
    const relayed = await prepare({ ...client, throughRelay: true }, sealing, 'https://inference.example.com/v1/chat/completions', {
      method: 'POST',
      body: 'x',
    });
    expect(relayed.encrypts).toBe(false);
    expect(relayed.headers.get('x-acme-nonce')).toBe(relayed.nonce);
  });

  it('a GET asks for no receipt and seals nothing', async () => {
    const prepared = await prepare(client, sealing, new URL('https://inference.example.com/v1/models'), {});
    expect(prepared).toMatchObject({ method: 'GET', wantsReceipt: false, encrypts: false, body: undefined });
    expect(prepared.headers.get('x-acme-receipt')).toBeNull();
  });

  it('refuses an app nonce the service would refuse, sending nothing', async () => {
    await expect(
      prepare(client, clear, 'https://inference.example.com/v1/chat/completions', { method: 'POST', body: 'x', headers: { 'x-acme-nonce': 'é' } }),
    ).rejects.toMatchObject({ code: 'ERR_VERIFY_NONCE' });
  });
});
