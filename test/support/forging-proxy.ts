import { request as httpRequest, createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest, createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { makeSelfSignedCredentials } from '../../src/tls/self-signed.ts';

/** A made-up answer the proxy writes instead of forwarding: what an attacker on the path would send. */
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
  /** How many requests it answered with a forgery. */
  forged: number;
  close(): Promise<void>;
}

export async function startForgingProxy(target: string, options: { tls?: boolean } = {}): Promise<ForgingProxy> {
  const upstream = new URL(target);
  const sockets = new Set<Socket>();
  const proxy: ForgingProxy = { url: '', certificate: undefined, forge: () => undefined, forged: 0, close: async () => {} };
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const forgery = proxy.forge(req.method ?? 'GET', req.url ?? '/');
    if (forgery !== undefined) {
      proxy.forged++;
      req.resume();
      res.writeHead(forgery.status, forgery.headers);
      res.end(forgery.body);
      return;
    }
    const send = upstream.protocol === 'https:' ? httpsRequest : httpRequest;
    const out = send(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
        rejectUnauthorized: false,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
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
