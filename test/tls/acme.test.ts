import { X509Certificate } from 'node:crypto';
import { connect as tlsConnect } from 'node:tls';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.ts';
import { startTestPebble, type TestPebble } from '../support/pebble.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { waitFor } from '../support/wait-for.ts';

/** SPEC 8 / issue 12: tls.mode acme against a real RFC 8555 server (Debian's pebble), http-01 answered by Sigil. */
let pebble: TestPebble;
let engine: TestEngine;
const started: TestSigil[] = [];
const insecure = new Agent({ connect: { rejectUnauthorized: false } });

beforeAll(async () => {
  [pebble, engine] = await Promise.all([startTestPebble(), startTestEngine({ modelNames: ['m'] })]);
});

afterAll(async () => {
  await Promise.all(started.map((s) => s.close(0)));
  await pebble.kill();
  await engine.close();
  await insecure.close();
});

function acmeConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    mode: 'acme',
    hostnames: ['localhost'],
    acme: {
      directory_url: pebble.directoryUrl,
      ca_file: pebble.caFile,
      email: 'ops@example.com',
      http_host: '127.0.0.1',
      http_port: pebble.httpPort,
      ...overrides,
    },
  };
}

async function presented(url: string): Promise<X509Certificate> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port: Number(port), servername: 'localhost', rejectUnauthorized: false }, () => {
      const certificate = socket.getPeerX509Certificate()!;
      socket.end();
      resolve(certificate);
    });
    socket.once('error', reject);
  });
}

async function boundKey(sigil: TestSigil): Promise<string> {
  const response = await request(`${sigil.url}/v1/verify/attestation`, { dispatcher: insecure });
  return ((await response.body.json()) as { binding: { tls_spki_sha256: string } }).binding.tls_spki_sha256;
}

const spki = (c: X509Certificate) => c.publicKey.export({ type: 'spki', format: 'der' }).toString('hex');

describe('tls.mode acme', () => {
  it('gets a certificate from the ACME server for a key made in the process, and binds that key', async () => {
    const sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { tls: acmeConfig() } });
    started.push(sigil);
    try {
      const certificate = await presented(sigil.url);
      expect(certificate.issuer).toMatch(/Pebble Intermediate CA/);
      expect(certificate.subjectAltName).toBe('DNS:localhost');
      const { createHash } = await import('node:crypto');
      expect(await boundKey(sigil)).toBe(
        createHash('sha256')
          .update(Buffer.from(spki(certificate), 'hex'))
          .digest('hex'),
      );
      // pebble validated the http-01 challenge against Sigil's own listener.
      expect(pebble.logs.join('\n')).toMatch(/Attempting to validate w\/ HTTP: http:\/\/localhost:\d+\/\.well-known\/acme-challenge\//);
    } finally {
      await sigil.close(0);
    }
  });

  it('renews before expiry without a restart, for the same key, and keeps the certificate while the ACME server is down', async () => {
    // Every check finds the certificate due (renew when under ~10 years left), once a second.
    const sigil = await startTestSigil({
      upstreams: { e: { url: engine.baseUrl } },
      models: [{ id: 'm' }],
      config: { tls: acmeConfig({ renew_before_s: 315_360_000, check_interval_s: 1 }) },
    });
    started.push(sigil);
    try {
      const first = await presented(sigil.url);
      const bound = await boundKey(sigil);
      const renewed = await waitFor('a renewed certificate', async () => {
        const now = await presented(sigil.url);
        return now.serialNumber !== first.serialNumber ? now : undefined;
      });
      expect(spki(renewed)).toBe(spki(first));
      expect(await boundKey(sigil)).toBe(bound);

      await pebble.kill();
      const logged = sigil.logs.length;
      await waitFor('a failed renewal', async () =>
        sigil.logs.slice(logged).some((l) => l.includes('tls certificate renewal failed: keeping the current certificate')) ? true : undefined,
      );
      const during = await presented(sigil.url);
      expect(during.serialNumber).toBe((await presented(sigil.url)).serialNumber);
      const served = await request(`${sigil.url}/v1/models`, { dispatcher: insecure });
      expect(served.statusCode).toBe(200);
      await served.body.dump();

      await pebble.start();
      const after = await waitFor('a renewal once the ACME server is back', async () => {
        const now = await presented(sigil.url);
        return now.serialNumber !== during.serialNumber ? now : undefined;
      });
      expect(spki(after)).toBe(spki(first));
      const failures = sigil.logs
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.msg === 'tls certificate renewal failed: keeping the current certificate');
      expect(failures.length).toBeGreaterThan(0);
      expect(failures[0]).toMatchObject({ level: 40, failures: 1, retry_in_s: 1 });
    } finally {
      await sigil.close(0);
    }
  });

  it('refuses to start, saying why, when the ACME server cannot be reached', async () => {
    const closed = await freePort();
    await expect(
      startTestSigil({
        upstreams: { e: { url: engine.baseUrl } },
        models: [{ id: 'm' }],
        config: { tls: acmeConfig({ directory_url: `https://127.0.0.1:${closed}/dir` }) },
      }),
    ).rejects.toThrow(new RegExp(`tls\\.acme: no certificate from https://127\\.0\\.0\\.1:${closed}/dir for localhost: .*ECONNREFUSED`));
  });
});
