import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isVerifyError } from '../../src/verify/errors.ts';
import { fetchVerificationMaterial, serviceRead } from '../../src/verify/service.ts';

/** A service whose JWKS and policy are fine and whose attestation document `attest` serves. */
const servers: Server[] = [];
const open = new Set<ServerResponse>();
const timers = new Set<NodeJS.Timeout>();

afterEach(async () => {
  for (const t of timers) clearInterval(t);
  timers.clear();
  for (const res of open) res.destroy();
  open.clear();
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

async function service(attest: (res: ServerResponse) => void): Promise<string> {
  const server = createServer((req, res) => {
    open.add(res);
    const path = (req.url ?? '').split('?')[0];
    if (path === '/v1/verify/jwks.json') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}');
    if (path === '/v1/verify/policy') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"version":1}');
    attest(res);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const nonce = new Uint8Array(32).fill(7);

async function fetchError(base: string, limits?: { maxDocumentBytes: number; deadlineMs: number }): Promise<string> {
  const err = await fetchVerificationMaterial(base, nonce, undefined, {}, limits === undefined ? undefined : serviceRead(limits)).then(
    () => new Error('the fetch succeeded'),
    (e: unknown) => e as Error,
  );
  expect(isVerifyError(err) ? err.code : err.message).toBe('ERR_VERIFY_FETCH');
  return err.message.replace(/\?nonce=[0-9a-f]+/, '?nonce=N');
}

describe('the verifier reads a service within bounds', () => {
  it('refuses an attestation document of 100 MB, streamed without a length, once it passes 4 MiB', async () => {
    const base = await service((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      let sent = 0;
      const pump = (): void => {
        while (sent < 100_000_000 && !res.destroyed) {
          sent += chunk.byteLength;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    expect(await fetchError(base)).toBe(`GET ${base}/v1/verify/attestation?nonce=N: the attestation document is larger than 4 MiB, the most accepted`);
  });

  it('ends an attestation document that drips a byte at a time at the overall deadline', async () => {
    const base = await service((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{');
      // Each byte comes well within any per-read timeout; only an overall deadline ends this body.
      timers.add(setInterval(() => res.write(' '), 100));
    });
    expect(await fetchError(base, { maxDocumentBytes: 4 * 1024 * 1024, deadlineMs: 1500 })).toBe(
      `GET ${base}/v1/verify/attestation?nonce=N: the attestation document did not arrive within 1.5 s, the deadline for it`,
    );
  });

  it('refuses an attestation document that does not come as JSON', async () => {
    const base = await service((res) => res.writeHead(200, { 'content-type': 'text/html' }).end('{"version":2}'));
    expect(await fetchError(base)).toBe(`GET ${base}/v1/verify/attestation?nonce=N: the attestation document came as "text/html", not application/json`);
  });
});
