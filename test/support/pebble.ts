import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { freePort } from './free-port.ts';
import { killChild } from './kill-child.ts';
import { waitFor } from './wait-for.ts';

/**
 * A real ACME server: Debian's `pebble` on loopback ports, with a CA made for its own HTTPS listener.
 * Validation is real: pebble fetches each http-01 answer from `httpPort` of the name it validates.
 */
export interface TestPebble {
  directoryUrl: string;
  /** The CA of pebble's own HTTPS listener (for `tls.acme.ca_file`). */
  caFile: string;
  /** The port pebble's validator connects to for http-01 (where Sigil must answer). */
  httpPort: number;
  /** Every line pebble logged. */
  logs: string[];
  kill(): Promise<void>;
  start(): Promise<void>;
}

function makeListenerCa(dir: string): { caFile: string; certFile: string; keyFile: string } {
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  run(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=pebble listener test CA',
  );
  run('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'listener.key', '-out', 'listener.csr', '-subj', '/CN=localhost');
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  run(
    'x509',
    '-req',
    '-in',
    'listener.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'listener.pem',
    '-days',
    '2',
    '-extfile',
    'san.ext',
  );
  return { caFile: join(dir, 'ca.pem'), certFile: join(dir, 'listener.pem'), keyFile: join(dir, 'listener.key') };
}

export async function startTestPebble(): Promise<TestPebble> {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-pebble-'));
  const { caFile, certFile, keyFile } = makeListenerCa(dir);
  const [port, managementPort, httpPort, tlsPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  writeFileSync(
    join(dir, 'pebble.json'),
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${port}`,
        managementListenAddress: `127.0.0.1:${managementPort}`,
        certificate: certFile,
        privateKey: keyFile,
        httpPort,
        tlsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  const directoryUrl = `https://127.0.0.1:${port}/dir`;
  const trusting = new Agent({ connect: { ca: readFileSync(caFile, 'utf8') } });
  const logs: string[] = [];
  let child: ChildProcess | undefined;

  const start = async () => {
    const proc = spawn('pebble', ['-config', join(dir, 'pebble.json')], {
      env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    const keep = (chunk: Buffer) => logs.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    await waitFor('pebble answering its directory', async () => {
      if (proc.exitCode !== null) throw new Error(`pebble exited with ${proc.exitCode}: ${logs.slice(-5).join(' | ')}`);
      const response = await request(directoryUrl, { dispatcher: trusting });
      await response.body.dump();
      return response.statusCode === 200;
    });
  };
  const kill = async () => {
    const proc = child;
    child = undefined;
    await killChild(proc);
  };
  await start();
  return { directoryUrl, caFile, httpPort, logs, kill, start };
}
