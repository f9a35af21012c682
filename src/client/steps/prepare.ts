import { randomBytes } from 'node:crypto';
import { NONCE_VALUE } from '../../protocol/brand-headers.ts';
import { VerifyError } from '../../verify/errors.ts';
import type { Attested } from '../attest.ts';
import type { ClientContext, Prepared } from './stage.ts';

async function bytesOf(body: RequestInit['body'] | undefined): Promise<Uint8Array | undefined> {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  return new Uint8Array(await new Response(body as BodyInit).arrayBuffer());
}

/**
 * Step one: the app's request read once, held to the service's origin, with identity encoding (receipts hash the bytes
 * on the wire), a receipt asked for on a POST, and the nonce that receipt must answer. Nothing is sent on a refusal.
 */
export async function prepare(client: ClientContext, attested: Attested, input: string | URL | Request, init: RequestInit): Promise<Prepared> {
  const request = input instanceof Request ? input : undefined;
  const url = new URL(request?.url ?? String(input));
  if (url.origin !== client.base.origin)
    throw new VerifyError('ERR_VERIFY_FETCH', `this attested fetch talks only to ${client.base.origin}, not ${url.origin}`);
  const method = (init.method ?? request?.method ?? 'GET').toUpperCase();
  const headers = new Headers(init.headers ?? request?.headers);
  headers.set('accept-encoding', 'identity');
  const body = await bytesOf(init.body ?? (request === undefined ? undefined : await request.arrayBuffer()));
  const wantsReceipt = method === 'POST';
  const encrypts = !client.throughRelay && attested.hpkeKeyConfig !== null && body !== undefined && body.length > 0;
  // The app's own nonce is honoured as sent (docs/ehbp.md, "The nonce"); else, sealed, none travels: both ends derive it from the
  // request's HPKE context; in the clear, a fresh one goes in the header.
  const names = client.headerNames;
  const ownNonce = headers.get(names.nonce) ?? undefined;
  if (ownNonce !== undefined && !NONCE_VALUE.test(ownNonce))
    throw new VerifyError(
      'ERR_VERIFY_NONCE',
      `the ${names.nonce} header must be 1 to 256 printable ASCII characters (the service would refuse it); nothing was sent`,
    );
  const nonce = ownNonce ?? randomBytes(32).toString('hex');
  if (wantsReceipt) {
    headers.set(names.receipt, 'true');
    if (!encrypts && ownNonce === undefined) headers.set(names.nonce, nonce);
  }
  return { url, init, method, headers, body, wantsReceipt, ownNonce, nonce, attested, encrypts };
}
