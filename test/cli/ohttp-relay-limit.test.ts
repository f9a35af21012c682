import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startObliviousRelay, type RunningRelay } from '../../src/cli/ohttp-relay.ts';

let gateway: Server;
let relay: RunningRelay;

beforeAll(async () => {
  // A gateway that reads whatever it is sent and answers 200: only the relay's own limit can refuse.
  gateway = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('sealed'));
  });
  await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
  relay = await startObliviousRelay({ gateway: `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`, port: 0, maxBodyBytes: 10 });
});

afterAll(async () => {
  await relay.close();
  await new Promise((resolve) => gateway.close(resolve));
});

it('a streamed body (no content-length) past --max-body-bytes is refused 413, as a declared one is, not called a gateway failure', async () => {
  const body = Readable.from([Buffer.alloc(8), Buffer.alloc(8)]);
  const answer = await request(relay.url, { method: 'POST', headers: { 'content-type': 'message/ohttp-req' }, body });
  expect(answer.statusCode).toBe(413);
  expect(await answer.body.json()).toEqual({
    error: { message: 'ohttp-relay: the encapsulated request is larger than 10 bytes', type: 'relay_error', param: null, code: null },
  });
});
