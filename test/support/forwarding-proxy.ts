import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP reverse proxy on a loopback port, as a load balancer is: every request reaches the target from the
 * proxy's one address (`localAddress`, default 127.0.0.1). `forwardedFor`, when given, names the client in `X-Forwarded-For` (appended to what came in).
 */
export interface ForwardingProxy {
  url: string;
  close(): Promise<void>;
}

export async function startForwardingProxy(
  target: string,
  options: { forwardedFor?: (req: IncomingMessage) => string; localAddress?: string } = {},
): Promise<ForwardingProxy> {
  const to = new URL(target);
  const server = createServer((req, res) => {
    const headers = { ...req.headers };
    if (options.forwardedFor !== undefined) {
      const client = options.forwardedFor(req);
      headers['x-forwarded-for'] = headers['x-forwarded-for'] === undefined ? client : `${String(headers['x-forwarded-for'])}, ${client}`;
    }
    const upstream = request(
      { host: to.hostname, port: to.port, method: req.method, path: req.url, headers, localAddress: options.localAddress ?? '127.0.0.1' },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
