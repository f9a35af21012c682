/** The bench's EHBP client: the npm `ehbp` library seals a chat request for Sigil's published HPKE key. */
import { Identity } from 'ehbp';
import { request, type Dispatcher } from 'undici';

export interface SealedRequest {
  headers: Record<string, string>;
  body: Uint8Array;
}

/** The server's identity, from the key configuration Sigil publishes at /.well-known/hpke-keys. */
export async function fetchServerIdentity(base: string, dispatcher: Dispatcher): Promise<Identity> {
  const response = await request(`${base}/.well-known/hpke-keys`, { dispatcher });
  if (response.statusCode !== 200) throw new Error(`${base}/.well-known/hpke-keys answered ${response.statusCode}`);
  return Identity.unmarshalPublicConfig(new Uint8Array(await response.body.arrayBuffer()));
}

export async function sealRequest(identity: Identity, url: string, headers: Record<string, string>, body: string): Promise<SealedRequest> {
  const { request: sealed } = await identity.encryptRequestWithContext(new Request(url, { method: 'POST', headers, body }));
  return { headers: Object.fromEntries(sealed.headers.entries()), body: new Uint8Array(await sealed.arrayBuffer()) };
}
