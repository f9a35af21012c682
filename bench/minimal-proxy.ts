/**
 * Node's floor: the smallest sensible node:http pass-through proxy (keep-alive to the engine, bodies
 * piped both ways, client disconnect cancels the engine request). No auth, no validation, no receipts.
 * With `--cert` and `--key` it is Node's HTTPS floor: TLS ends here with the same versions, suites,
 * groups and ALPN as Sigil (src/tls/hardening.ts), so both negotiate the same handshake.
 *
 * With `--processes N` (N > 1) it runs as Sigil's workers do: a node:cluster primary and N workers behind one
 * socket, nothing shared: bench/workers.ts's measure of what a second process costs on the machine itself.
 *
 * Run: `node --import tsx bench/minimal-proxy.ts --port N --upstream http://127.0.0.1:M [--cert cert.pem --key key.pem] [--processes N]`.
 */
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { Agent, createServer, request, type RequestListener } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { parseArgs } from 'node:util';
import { secureContextOptions } from '../src/tls/hardening.ts';

const { values } = parseArgs({
  options: { port: { type: 'string' }, upstream: { type: 'string' }, cert: { type: 'string' }, key: { type: 'string' }, processes: { type: 'string' } },
});
const processes = Number(values.processes ?? 1);
if ((values.cert === undefined) !== (values.key === undefined)) throw new Error('--cert and --key go together');
const upstream = new URL(values.upstream ?? 'http://127.0.0.1:8000');
const agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096 });

const relay: RequestListener = (req, res) => {
  const out = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent }, (up) => {
    res.writeHead(up.statusCode ?? 502, up.headers);
    up.pipe(res);
  });
  out.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
    res.end();
  });
  res.on('close', () => {
    if (!res.writableFinished) out.destroy();
  });
  req.pipe(out);
};

function tlsServer(cert: string, key: string) {
  const credentials = { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
  const server = createHttpsServer({ keepAliveTimeout: 120_000, ...secureContextOptions(credentials), ALPNProtocols: ['http/1.1'] }, relay);
  server.on('tlsClientError', (_err, socket) => socket.destroy());
  return server;
}

if (processes > 1 && cluster.isPrimary) {
  let listening = 0;
  for (let i = 0; i < processes; i++)
    cluster.fork().on('message', (port: number) => {
      if (++listening === processes) process.stdout.write(JSON.stringify({ port }) + '\n');
    });
  process.on('SIGTERM', () => process.exit(0));
  process.on('SIGINT', () => process.exit(0));
} else {
  startServer();
}

function startServer(): void {
  const server =
    values.cert !== undefined && values.key !== undefined ? tlsServer(values.cert, values.key) : createServer({ keepAliveTimeout: 120_000 }, relay);
  server.listen(Number(values.port ?? 0), '127.0.0.1', () => {
    const { port } = server.address() as { port: number };
    if (cluster.isWorker) process.send!(port);
    else process.stdout.write(JSON.stringify({ port }) + '\n');
  });
  process.on('SIGTERM', () => process.exit(0));
  process.on('SIGINT', () => process.exit(0));
}
