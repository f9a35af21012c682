/**
 * `sigil collateral fetch` against a hostile mirror on loopback: a body that never ends, a drip of one byte a second,
 * a redirect to another server, an error page in place of the VCEK, and a name that does not resolve. Each run stops
 * with its own exit status and a sentence naming the file and the URL, and leaves no bundle, whole or partial.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collateralCommand } from '../../../src/cli/collateral.ts';
import { ARK_GENOA, ASK_GENOA } from '../../../src/verify/evidence/roots/amd-genoa.ts';

const v = (path: string) => new URL(`../../vectors/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-collateral-hostile-'));
const REPORT = v('snp/openpcc-azure-genoa-report.bin');
const AZURE_CHIP_ID = 'c70912d8d216bd3f403e97bda2d476924b962752119263a3c8dba9fc40badfc99038d2352aae22520a9003b4262e1cc3136d035b42e4b022b4196f95981a45c6';
const VCEK_PATH = `/vcek/v1/Genoa/${AZURE_CHIP_ID}?blSPL=10&teeSPL=0&snpSPL=23&ucodeSPL=84`;

/** AMD KDS's real answers for Azure's Genoa report. */
const KDS: Record<string, Uint8Array | string> = {
  [VCEK_PATH]: new Uint8Array(new x509.X509Certificate(readFileSync(v('snp/openpcc-genoa-vcek.pem'), 'utf8')).rawData),
  '/vcek/v1/Genoa/cert_chain': `${ASK_GENOA.trim()}\n${ARK_GENOA.trim()}\n`,
  '/vcek/v1/Genoa/crl': new Uint8Array(new x509.X509Crl(readFileSync(v('snp/openpcc-amd-genoa-crl.pem'), 'utf8')).rawData),
};

const ONE_GIB = 1024 * 1024 * 1024;
/** What the endless body wrote before the client hung up, known once the response closed. */
let hugeSent: Promise<number> = Promise.resolve(0);
let dripClosed: Promise<void> = Promise.resolve();
const otherAsked: string[] = [];

/** Writes zeros up to 1 GiB, only as fast as the client reads (no buffering on this side either), until the client hangs up. */
function endless(res: ServerResponse): Promise<number> {
  return new Promise((resolve) => {
    const chunk = Buffer.alloc(64 * 1024);
    let sent = 0;
    let closed = false;
    res.on('close', () => {
      closed = true;
      resolve(sent);
    });
    res.writeHead(200, { 'content-type': 'application/pkix-cert' });
    const pump = () => {
      while (!closed && sent < ONE_GIB) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      if (!closed) res.end();
    };
    pump();
  });
}

/** One byte a second of a 600-byte body: ten minutes for a client without a deadline. */
function drip(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    res.writeHead(200, { 'content-length': '600' });
    const timer = setInterval(() => res.write('0'), 1000);
    res.on('close', () => {
      clearInterval(timer);
      resolve();
    });
  });
}

let mirror: Server;
let other: Server;
let base = '';
let otherBase = '';

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

beforeAll(async () => {
  other = createServer((req, res) => {
    otherAsked.push(req.url ?? '');
    res.writeHead(200).end(KDS[(req.url ?? '').replace(/^\/ok/, '')]);
  });
  otherBase = await listen(other);
  mirror = createServer((req, res) => {
    const [, mode, ...rest] = (req.url ?? '').split('/');
    const path = `/${rest.join('/')}`;
    if (mode === 'ok' && KDS[path] !== undefined) return void res.writeHead(200).end(KDS[path]);
    if (mode === 'moved') return void res.writeHead(302, { location: `/ok${path}` }).end();
    if (mode === 'away') return void res.writeHead(302, { location: `${otherBase}/ok${path}` }).end();
    if (mode === 'huge') return void (hugeSent = endless(res));
    if (mode === 'drip') return void (dripClosed = drip(res));
    if (mode === 'wrong') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>Mirror under maintenance</body></html>');
    res.writeHead(404).end();
  });
  base = await listen(mirror);
});
afterAll(async () => {
  mirror.closeAllConnections();
  await new Promise((resolve) => mirror.close(resolve));
  await new Promise((resolve) => other.close(resolve));
  rmSync(work, { recursive: true, force: true });
});

/** Runs the fetch into `<fresh parent>/bundle`; returns what it printed and what the parent holds afterwards. */
async function fetchFrom(kds: string, extra: string[] = [], prepare?: (out: string) => void) {
  const parent = mkdtempSync(join(work, 'run-'));
  const out = join(parent, 'bundle');
  prepare?.(out);
  let stdout = '';
  let stderr = '';
  const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) } };
  const code = await collateralCommand(['fetch', '--snp-report', REPORT, '--out', out, '--amd-kds', kds, ...extra], io);
  return { code, stdout, stderr, out, left: readdirSync(parent) };
}

describe('sigil collateral fetch from a hostile mirror', () => {
  it('follows a redirect within the same server and writes the whole bundle at once', async () => {
    const r = await fetchFrom(`${base}/moved`);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.left).toEqual(['bundle']);
    expect(readdirSync(r.out).sort()).toEqual(['amd-cert-chain.pem', 'amd-crl.der', 'amd-vcek.der']);
  });

  it('refuses a body past the cap per file as it streams, exits 4 and leaves nothing behind', async () => {
    const r = await fetchFrom(`${base}/huge`);
    expect(r.stderr).toBe(
      `sigil collateral fetch: amd-vcek.der: ${base}/huge${VCEK_PATH} answered more than 16777216 bytes, the cap for one file: it is not the file asked for\n`,
    );
    expect(r.code).toBe(4);
    expect(r.left).toEqual([]);
    // The client stopped reading near the cap: the server, which writes only as fast as it is read, sent far less than its 1 GiB.
    expect(await hugeSent).toBeLessThan(64 * 1024 * 1024);
  });

  it('takes a smaller cap from --max-file-bytes', async () => {
    const r = await fetchFrom(`${base}/ok`, ['--max-file-bytes', '100']);
    expect(r.stderr).toBe(
      `sigil collateral fetch: amd-vcek.der: ${base}/ok${VCEK_PATH} answered more than 100 bytes, the cap for one file: it is not the file asked for\n`,
    );
    expect(r.code).toBe(4);
  });

  it('gives up on a drip at the overall deadline, exits 3 and leaves nothing behind', async () => {
    const started = Date.now();
    const r = await fetchFrom(`${base}/drip`, ['--deadline', '2']);
    expect(r.stderr).toBe(`sigil collateral fetch: amd-vcek.der: ${base}/drip${VCEK_PATH} gave no complete answer within the deadline of 2 s\n`);
    expect(r.code).toBe(3);
    expect(r.left).toEqual([]);
    await dripClosed;
    // The drip would take 600 s; the deadline ended it.
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it('does not follow a redirect to another server, exits 4 and asks that server nothing', async () => {
    otherAsked.length = 0;
    const r = await fetchFrom(`${base}/away`);
    expect(r.stderr).toBe(
      `sigil collateral fetch: amd-vcek.der: ${base}/away${VCEK_PATH} redirected to ${otherBase}, another server: collateral is taken only from the server named\n`,
    );
    expect(r.code).toBe(4);
    expect(otherAsked).toEqual([]);
    expect(r.left).toEqual([]);
  });

  it('refuses an error page served as the VCEK, exits 4 and leaves an existing bundle as it was', async () => {
    const r = await fetchFrom(`${base}/wrong`, [], (out) => {
      mkdirSync(out);
      writeFileSync(join(out, 'amd-vcek.der'), 'the previous VCEK');
    });
    expect(r.stderr).toBe(
      `sigil collateral fetch: amd-vcek.der: ${base}/wrong${VCEK_PATH} answered something that is not an X.509 certificate; the bundle was not written\n`,
    );
    expect(r.code).toBe(4);
    expect(r.left).toEqual(['bundle']);
    expect(readdirSync(r.out)).toEqual(['amd-vcek.der']);
    expect(readFileSync(join(r.out, 'amd-vcek.der'), 'utf8')).toBe('the previous VCEK');
  });

  it('offline, keeps the cause (ENOTFOUND), names --amd-kds and writes nothing', async () => {
    // .invalid never resolves (RFC 6761), online or not.
    const r = await fetchFrom('http://kdsintf.invalid');
    expect(r.stderr).toBe(
      `sigil collateral fetch: amd-vcek.der: http://kdsintf.invalid${VCEK_PATH} could not be reached (getaddrinfo ENOTFOUND kdsintf.invalid)\n` +
        'If this machine is offline, run the same command on one that is online and copy the directory, or name a mirror you can reach with --amd-kds URL. Nothing was written.\n',
    );
    expect(r.code).toBe(3);
    expect(r.left).toEqual([]);
  });
});
