import { request as httpRequest, createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest, createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { makeSelfSignedCredentials } from '../../src/tls/self-signed.ts';

/** A made-up answer the proxy writes instead of forwarding: what an attacker on the path would send. */
/** A made-up chat completion for model `m`, as a forging proxy would answer in the engine's place. */
export const FORGED_COMPLETION = JSON.stringify({
  id: 'chatcmpl-forged',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: 'forged answer' }, finish_reason: 'stop' }],
});

export interface Forgery {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * A reverse proxy on a loopback port that relays every request to `target` (a load balancer, or anyone on
 * the path), except those `forge` answers itself. With `tls`, it ends TLS with its own self-signed key for
 * `localhost` (trust `certificate` as a load balancer's CA).
 */
export interface ForgingProxy {
  url: string;
  certificate: string | undefined;
  /** Returns a forgery for a request it should answer itself; undefined to relay it. */
  forge: (method: string, path: string) => Forgery | undefined;
  /** The path (query included) it asks the service for instead of the one the client asked. */
  redirect: (method: string, path: string) => string;
  /** Returns how to change the body of the service's answer (read whole) before relaying it; undefined to relay it as it comes. */
  rewrite: (method: string, path: string) => ((body: Buffer) => Buffer) | undefined;
  /** Response header names (lower case) it strips from the service's answers, as a balancer that rewrites headers would. */
  dropAnswerHeaders: string[];
  /** How many requests it answered with a forgery. */
  forged: number;
  /** Every request it received, as `METHOD path`, oldest first. */
  requests: string[];
  /** Relays everything again, unchanged. */
  reset(): void;
  close(): Promise<void>;
}

export async function startForgingProxy(target: string, options: { tls?: boolean } = {}): Promise<ForgingProxy> {
  const upstream = new URL(target);
  const sockets = new Set<Socket>();
  const proxy: ForgingProxy = {
    url: '',
    certificate: undefined,
    forge: () => undefined,
    redirect: (_method, path) => path,
    rewrite: () => undefined,
    dropAnswerHeaders: [],
    forged: 0,
    requests: [],
    reset: () => {
      proxy.forge = () => undefined;
      proxy.redirect = (_method, path) => path;
      proxy.rewrite = () => undefined;
      proxy.dropAnswerHeaders = [];
    },
    close: async () => {},
  };
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const method = req.method ?? 'GET';
    const path = req.url ?? '/';
    proxy.requests.push(`${method} ${path}`);
    const forgery = proxy.forge(method, path);
    if (forgery !== undefined) {
      proxy.forged++;
      req.resume();
      res.writeHead(forgery.status, forgery.headers);
      res.end(forgery.body);
      return;
    }
    const change = proxy.rewrite(method, path);
    const send = upstream.protocol === 'https:' ? httpsRequest : httpRequest;
    const out = send(
      {
        host: upstream.hostname,
        port: upstream.port,
        method,
        path: proxy.redirect(method, path),
        headers: { ...req.headers, host: upstream.host },
        rejectUnauthorized: false,
      },
      (answer) => {
        for (const name of proxy.dropAnswerHeaders) delete answer.headers[name];
        if (change === undefined) {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          return;
        }
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          let body: Buffer;
          try {
            body = change(Buffer.concat(chunks));
          } catch (err) {
            res.destroy(err as Error);
            return;
          }
          const headers = { ...answer.headers, 'content-length': String(body.length) };
          delete headers['transfer-encoding'];
          res.writeHead(answer.statusCode ?? 502, headers);
          res.end(body);
        });
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  };
  const credentials = options.tls === true ? await makeSelfSignedCredentials(['localhost']) : undefined;
  const server = credentials === undefined ? createHttpServer(handle) : createHttpsServer({ key: credentials.key, cert: credentials.cert }, handle);
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const host = credentials === undefined ? '127.0.0.1' : 'localhost';
  proxy.url = `${credentials === undefined ? 'http' : 'https'}://${host}:${(server.address() as AddressInfo).port}`;
  proxy.certificate = credentials?.cert;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    });
  return proxy;
}
