import { fetch as undiciFetch } from 'undici';
import { tlsPinErrorOf } from '../../verify/tls-pin.ts';
import type { AttestedSession } from '../session.ts';

/**
 * Sends over the current verdict's connections only: pinned to the attested TLS key where TLS ends in the enclave. A
 * connection presenting another key is refused before a byte is written; the service is then attested again, and the
 * request retried once if the new verdict vouches for exactly the key presented.
 */
export async function sendPinned(session: AttestedSession, url: URL, init: RequestInit, body: Uint8Array | undefined): Promise<Response> {
  const request = () => ({ ...init, ...(body === undefined ? {} : { body }), dispatcher: session.agent }) as Parameters<typeof undiciFetch>[1];
  try {
    return (await undiciFetch(url, request())) as unknown as Response;
  } catch (err) {
    const pinError = tlsPinErrorOf(err);
    if (pinError === undefined || pinError.presented === undefined) throw err;
    const renewed = await session.reattest();
    if (renewed.tlsSpkiSha256 !== pinError.presented) throw pinError;
    return (await undiciFetch(url, request())) as unknown as Response;
  }
}
