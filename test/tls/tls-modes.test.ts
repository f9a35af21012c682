import 'reflect-metadata';
import { createHash, generateKeyPairSync, KeyObject, webcrypto, X509Certificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { selfSignedLocalhost } from '../support/self-signed.ts';
import type { AttestationProvider } from '../../src/attestation/provider.ts';

/** SPEC 8 / issue 12: TLS ending in Sigil, its key bound in the attestation, and what it refuses. */
let engine: TestEngine;
const started: TestSigil[] = [];
const insecure = new Agent({ connect: { rejectUnauthorized: false } });

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
});

afterAll(async () => {
  await Promise.all(started.map((s) => s.close(0)));
  await engine.close();
  await insecure.close();
});

async function sigilWith(tls: Record<string, unknown>, extra: Record<string, unknown> = {}, provider?: AttestationProvider): Promise<TestSigil> {
  const sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { tls, ...extra },
    ...(provider === undefined ? {} : { start: { attestationProvider: provider } }),
  });
  started.push(sigil);
  return sigil;
}

function portOf(sigil: TestSigil): number {
  return Number(new URL(sigil.url).port);
}

/** Completes a handshake and returns the socket (the caller ends it), or the handshake's error. */
function handshake(port: number, options: ConnectionOptions = {}): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false, ...options }, () => resolve(socket));
    socket.once('error', reject);
  });
}

const spkiOf = (certificate: X509Certificate) =>
  createHash('sha256')
    .update(certificate.publicKey.export({ type: 'spki', format: 'der' }))
    .digest('hex');

async function attestationOf(sigil: TestSigil): Promise<{ binding: { tls_spki_sha256: string | null } }> {
  const response = await request(`${sigil.url}/v1/verify/attestation`, { dispatcher: insecure });
  return (await response.body.json()) as { binding: { tls_spki_sha256: string | null } };
}

describe('tls.mode self-signed', () => {
  let sigil: TestSigil;
  beforeAll(async () => {
    sigil = await sigilWith({ mode: 'self-signed', hostnames: ['localhost', 'sigil.test'] }, { limits: { headers_timeout_ms: 800 } });
  });

  it('listens on https and binds the SPKI hash of the key it presents in the attestation', async () => {
    expect(sigil.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const socket = await handshake(portOf(sigil));
    const certificate = socket.getPeerX509Certificate()!;
    socket.end();
    expect(certificate.subjectAltName).toBe('DNS:localhost, DNS:sigil.test');
    expect(certificate.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect((await attestationOf(sigil)).binding.tls_spki_sha256).toBe(spkiOf(certificate));
    const log = sigil.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'sigil listening')!;
    expect(log.tls_spki_sha256).toBe(spkiOf(certificate));
    expect(sigil.logs.join('\n')).not.toContain('PRIVATE KEY');
  });

  it('negotiates TLS 1.3 by default, and a TLS 1.2 client gets a forward-secret AEAD suite', async () => {
    const modern = await handshake(portOf(sigil));
    expect(modern.getProtocol()).toBe('TLSv1.3');
    modern.end();
    const old = await handshake(portOf(sigil), { maxVersion: 'TLSv1.2' });
    expect(old.getProtocol()).toBe('TLSv1.2');
    expect(old.getCipher().name).toMatch(/^ECDHE-ECDSA-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)$/);
    old.end();
  });

  it("refuses a TLS 1.2 client's renegotiation by closing that connection, and keeps serving", async () => {
    const old = await handshake(portOf(sigil), { maxVersion: 'TLSv1.2' });
    const outcome = await new Promise<string>((resolve) => {
      old.once('close', () => resolve('closed'));
      old.on('error', () => undefined);
      const asked = old.renegotiate({ rejectUnauthorized: false }, (err) => resolve(err === null ? 'renegotiated' : 'refused'));
      if (!asked) resolve('not sent');
    });
    expect(outcome).not.toBe('renegotiated');
    expect(outcome).not.toBe('not sent');
    const response = await request(`${sigil.url}/v1/models`, { dispatcher: insecure });
    expect(response.statusCode).toBe(200);
    await response.body.dump();
  });

  it('refuses TLS 1.0 and 1.1, and TLS 1.2 suites without forward secrecy or AEAD', async () => {
    // The server's alerts: protocol_version for TLS 1.0/1.1, handshake_failure when no offered suite is acceptable.
    await expect(handshake(portOf(sigil), { minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT:@SECLEVEL=0' })).rejects.toMatchObject({
      code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION',
    });
    await expect(
      handshake(portOf(sigil), { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA:AES128-GCM-SHA256' }),
      // OpenSSL 3.0 names this alert SSLV3_ALERT_HANDSHAKE_FAILURE, OpenSSL 3.5 (Node 24) SSL/TLS_ALERT_HANDSHAKE_FAILURE.
    ).rejects.toMatchObject({ code: expect.stringMatching(/^ERR_SSL_(SSLV3|SSL\/TLS)_ALERT_HANDSHAKE_FAILURE$/) });
  });

  it('serves the API over TLS', async () => {
    const response = await request(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: insecure,
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(response.statusCode).toBe(200);
    expect(response.headers['strict-transport-security']).toBe('max-age=31536000');
    expect(((await response.body.json()) as { object: string }).object).toBe('chat.completion');
  });

  it('drops a client that stalls in the handshake within the header timeout, and keeps serving', async () => {
    for (const opening of [Buffer.alloc(0), Buffer.from('160301020001', 'hex')]) {
      const socket = netConnect(portOf(sigil), '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(opening);
      const t0 = Date.now();
      await new Promise((resolve) => socket.once('close', resolve));
      expect(Date.now() - t0).toBeLessThan(4000);
    }
    const again = await handshake(portOf(sigil));
    again.end();
  });

  it('closes a connection that speaks plain HTTP or garbage to the TLS port, and keeps serving', async () => {
    for (const bytes of ['GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n', '\x00\x01\x02garbage\xff\xfe']) {
      const socket = netConnect(portOf(sigil), '127.0.0.1');
      const received: Buffer[] = [];
      socket.on('data', (d: Buffer) => received.push(d));
      socket.on('error', () => undefined);
      socket.write(Buffer.from(bytes, 'latin1'));
      await new Promise((resolve) => socket.once('close', resolve));
      expect(Buffer.concat(received).toString('latin1')).not.toContain('HTTP/1.1 200');
    }
    const response = await request(`${sigil.url}/v1/models`, { dispatcher: insecure });
    expect(response.statusCode).toBe(200);
    await response.body.dump();
  });
});

describe('tls.mode files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-tls-files-'));
  const { keyFile: key, certFile: cert } = selfSignedLocalhost(dir, { days: 30 });

  it("serves the operator's certificate and binds its key", async () => {
    const sigil = await sigilWith({ mode: 'files', cert_file: cert, key_file: key });
    const socket = await handshake(portOf(sigil));
    const presented = socket.getPeerX509Certificate()!;
    socket.end();
    const fileCertificate = new X509Certificate(execFileSync('cat', [cert]));
    expect(presented.fingerprint256).toBe(fileCertificate.fingerprint256);
    expect((await attestationOf(sigil)).binding.tls_spki_sha256).toBe(spkiOf(fileCertificate));
  });

  it("refuses to start with an expired certificate, a missing file, or a key that is not the certificate's", async () => {
    const expiredKey = join(dir, 'expired-key.pem');
    const expired = join(dir, 'expired.pem');
    const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
    const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as CryptoKeyPair;
    const old = await x509.X509CertificateGenerator.createSelfSigned(
      { name: 'CN=localhost', notBefore: new Date('2020-01-01T00:00:00Z'), notAfter: new Date('2021-01-01T00:00:00Z'), keys, signingAlgorithm: algorithm },
      webcrypto as unknown as Crypto,
    );
    writeFileSync(expired, old.toString('pem'));
    writeFileSync(expiredKey, KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' }));
    await expect(sigilWith({ mode: 'files', cert_file: expired, key_file: expiredKey })).rejects.toThrow(
      /the certificate expired on 2021-01-01T00:00:00\.000Z/,
    );
    await expect(sigilWith({ mode: 'files', cert_file: join(dir, 'absent.pem'), key_file: key })).rejects.toThrow(
      /tls\.cert_file: cannot read .*absent\.pem \(ENOENT\)/,
    );
    const other = join(dir, 'other-key.pem');
    writeFileSync(other, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }));
    await expect(sigilWith({ mode: 'files', cert_file: cert, key_file: other })).rejects.toThrow(
      /the certificate is for another key than the private key given/,
    );
  });

  it('names the missing setting when files mode lacks a file', async () => {
    await expect(sigilWith({ mode: 'files', cert_file: cert })).rejects.toThrow(/tls\.key_file: tls\.mode files needs tls\.key_file/);
  });
});

describe('tls.mode off', () => {
  const tdx: AttestationProvider = {
    tee: 'tdx',
    collect: async (reportData) => ({ tee: 'tdx', measurement: 'ab'.repeat(48), outblob: new Uint8Array(64), auxblob: new Uint8Array(), reportData }),
  };

  it('refuses to start on a hardware TEE unless plaintext is allowed explicitly', async () => {
    await expect(sigilWith({ mode: 'off' }, {}, tdx)).rejects.toThrow(/tls\.mode is off on a tdx machine: prompts would cross the host's network in plaintext/);
    const allowed = await sigilWith({ mode: 'off', allow_plaintext: true }, {}, tdx);
    expect(allowed.url).toMatch(/^http:\/\//);
    expect((await attestationOf(allowed)).binding.tls_spki_sha256).toBeNull();
  }, 120_000); // the first start on a TEE hashes the node binary and node_modules for the manifest
});
