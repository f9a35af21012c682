/**
 * Node's floor: the smallest sensible node:http pass-through proxy (keep-alive to the engine, bodies
 * piped both ways, client disconnect cancels the engine request). No auth, no validation, no receipts.
 *
 * Run: `node --import tsx bench/minimal-proxy.ts --port N --upstream http://127.0.0.1:M`.
 */
import { Agent, createServer, request } from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string' }, upstream: { type: 'string' } } });
const upstream = new URL(values.upstream ?? 'http://127.0.0.1:8000');
const agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096 });

const server = createServer({ keepAliveTimeout: 120_000 }, (req, res) => {
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
});
server.listen(Number(values.port ?? 0), '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: (server.address() as { port: number }).port }) + '\n'));
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
