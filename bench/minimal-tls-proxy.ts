/**
 * Node's HTTPS floor: the smallest sensible node:https pass-through proxy (TLS ends here with the bench
 * key, keep-alive http.Agent to the engine, bodies piped both ways, client disconnect cancels the engine
 * request). The same TLS versions, suites, groups and ALPN as Sigil (src/tls/hardening.ts), so both
 * negotiate the same handshake; no auth, no validation, no receipts.
 *
 * Run: `node --import tsx bench/minimal-tls-proxy.ts --port N --upstream http://127.0.0.1:M --cert cert.pem --key key.pem`.
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { createServer } from 'node:https';
import { parseArgs } from 'node:util';
import { secureContextOptions } from '../src/tls/hardening.ts';

const { values } = parseArgs({ options: { port: { type: 'string' }, upstream: { type: 'string' }, cert: { type: 'string' }, key: { type: 'string' } } });
if (values.cert === undefined || values.key === undefined) throw new Error('--cert and --key are required');
const upstream = new URL(values.upstream ?? 'http://127.0.0.1:8000');
const agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096 });
const credentials = { cert: readFileSync(values.cert, 'utf8'), key: readFileSync(values.key, 'utf8') };

const server = createServer({ keepAliveTimeout: 120_000, ...secureContextOptions(credentials), ALPNProtocols: ['http/1.1'] }, (req, res) => {
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
server.on('tlsClientError', (_err, socket) => socket.destroy());
server.listen(Number(values.port ?? 0), '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: (server.address() as { port: number }).port }) + '\n'));
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
