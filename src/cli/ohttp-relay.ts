/**
 * `sigil ohttp-relay`: a minimal Oblivious HTTP relay (RFC 9458 §6.3), for tests and for self-hosting. It is what a
 * third party runs, never the enclave's operator and never in the enclave (docs/ohttp.md): it forwards encapsulated
 * requests to one gateway and their answers back, copying the body and the content type and nothing else, so the
 * gateway sees the relay's address and the relay sees only ciphertext. It logs nothing about a request.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Agent, request } from 'undici';
import { parseCommandLine, usageExit, type CommandSpec } from './command-line.ts';
import { RelayBodyTooLargeError, UsageError } from './cli-errors.ts';
import { CHUNKED_REQUEST_MEDIA_TYPE, GATEWAY_PATH, KEYS_MEDIA_TYPE, REQUEST_MEDIA_TYPE } from '../protocol/ohttp.ts';

export const command = {
  name: 'ohttp-relay',
  summary: `A minimal Oblivious HTTP relay (docs/ohttp.md): POST / with an encapsulated request (message/ohttp-req or
message/ohttp-chunked-req) is forwarded to the gateway and its sealed answer streamed back; GET / answers the
gateway's key configuration. Nothing but the body and its content type crosses: no client address, no other header.
Run by a third party, never by the service's operator: a relay run by the operator hides nothing from the operator.`,
  options: {
    gateway: { type: 'string', value: 'URL', description: `the service (its ${GATEWAY_PATH} is the gateway) or the gateway's full URL` },
    listen: { type: 'string', value: 'HOST:PORT', description: 'where clients connect', default: '127.0.0.1:8470' },
    'max-body-bytes': { type: 'string', value: 'N', description: 'the largest encapsulated request forwarded (default 16 MiB)' },
  },
} as const satisfies CommandSpec;

export interface RunningRelay {
  url: string;
  close(): Promise<void>;
}

/** The relay, listening: an in-process API for tests and for `run`. */
export async function startObliviousRelay(options: {
  gateway: string;
  host?: string;
  port?: number;
  maxBodyBytes?: number;
  localAddress?: string;
}): Promise<RunningRelay> {
  const gateway = new URL(options.gateway);
  if (!gateway.pathname.endsWith(GATEWAY_PATH)) gateway.pathname = `${gateway.pathname.replace(/\/$/, '')}${GATEWAY_PATH}`;
  const maxBodyBytes = options.maxBodyBytes ?? 16 * 1024 * 1024;
  // localAddress: the address the gateway sees, which tests set apart from the clients' to show which one it learns
  // (undici takes it as the agent's own option: under `connect` it is ignored).
  const dispatcher = new Agent(options.localAddress === undefined ? {} : { localAddress: options.localAddress });
  const server: Server = createServer((req, res) => {
    relay(req, res, gateway, maxBodyBytes, dispatcher).catch((err: unknown) => {
      // undici wraps what the body stream threw: the cause says the body was refused, not the gateway.
      const tooLarge = [err, (err as { cause?: unknown })?.cause].find((e) => e instanceof RelayBodyTooLargeError);
      if (!res.headersSent) answer(res, tooLarge === undefined ? 502 : 413, tooLarge?.message ?? 'the gateway could not be reached');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8470, options.host ?? '127.0.0.1', resolve);
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(':') ? `[${address}]` : address}:${port}/`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await dispatcher.close();
    },
  };
}

function answer(res: ServerResponse, status: number, message: string): void {
  const body = JSON.stringify({ error: { message: `ohttp-relay: ${message}`, type: 'relay_error', param: null, code: null } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function relay(req: IncomingMessage, res: ServerResponse, gateway: URL, maxBodyBytes: number, dispatcher: Agent): Promise<void> {
  if (req.method === 'GET') {
    const keys = await request(gateway, { method: 'GET', headers: { accept: KEYS_MEDIA_TYPE }, dispatcher });
    res.writeHead(keys.statusCode, { 'content-type': String(keys.headers['content-type'] ?? 'application/octet-stream') });
    await pipeline(keys.body, res);
    return;
  }
  if (req.method !== 'POST') return answer(res, 405, 'only POST (an encapsulated request) and GET (the key configuration) are relayed');
  const type = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (type !== REQUEST_MEDIA_TYPE && type !== CHUNKED_REQUEST_MEDIA_TYPE)
    return answer(res, 415, `the body must be ${REQUEST_MEDIA_TYPE} or ${CHUNKED_REQUEST_MEDIA_TYPE}`);
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > maxBodyBytes) return answer(res, 413, new RelayBodyTooLargeError(maxBodyBytes).message);
  let seen = 0;
  const body = Readable.from(
    (async function* () {
      for await (const piece of req) {
        seen += (piece as Buffer).length;
        if (seen > maxBodyBytes) throw new RelayBodyTooLargeError(maxBodyBytes);
        yield piece as Buffer;
      }
    })(),
  );
  const forwarded = await request(gateway, { method: 'POST', headers: { 'content-type': type }, body, dispatcher });
  const headers: Record<string, string> = { 'content-type': String(forwarded.headers['content-type'] ?? 'application/octet-stream') };
  if (forwarded.headers.incremental !== undefined) headers.incremental = String(forwarded.headers.incremental);
  res.writeHead(forwarded.statusCode, headers);
  res.flushHeaders();
  await pipeline(forwarded.body, res);
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandLine(command, argv);
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  try {
    if (values.gateway === undefined) throw new UsageError('give --gateway URL (the service whose gateway this relay forwards to)');
    const listen = /^(.+):(\d+)$/.exec(values.listen);
    if (listen === null) throw new UsageError('--listen takes HOST:PORT');
    const running = await startObliviousRelay({
      gateway: values.gateway,
      host: listen[1]!.replace(/^\[|\]$/g, ''),
      port: Number(listen[2]),
      ...(values['max-body-bytes'] === undefined ? {} : { maxBodyBytes: Number(values['max-body-bytes']) }),
    });
    process.stderr.write(`sigil ohttp-relay: relaying ${running.url} to ${values.gateway}; it logs nothing about the requests it carries\n`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await running.close();
    return 0;
  } catch (err) {
    const usage = usageExit(command, err);
    if (usage !== undefined) return usage;
    process.stderr.write(`sigil ohttp-relay: ${(err as Error).message}\n`);
    return 1;
  }
}
