import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { describeError, SigilError } from '../../src/protocol/sigil-error.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

// Nothing listens on port 9 of loopback: these starts fail before an engine would matter.
const NO_ENGINE = { e: { url: 'http://127.0.0.1:9/v1' } };
const started: TestSigil[] = [];

afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

async function startFailure(options: Parameters<typeof startTestSigil>[0]): Promise<SigilError> {
  const error: unknown = await startTestSigil(options).then(
    (sigil) => {
      started.push(sigil);
      return undefined;
    },
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(SigilError);
  return error as SigilError;
}

describe("Sigil's start-up errors carry a stable code (docs/errors.md)", () => {
  it('a configuration that cannot be used: ERR_CONFIG_INVALID, the code first where a check reports it', () => {
    let error: unknown;
    try {
      parseConfig('listen: { port: "eighty" }\n', '/etc/sigil/sigil.yaml');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SigilError);
    expect(error).toMatchObject({ code: 'ERR_CONFIG_INVALID', name: 'ConfigError' });
    expect(describeError(error)).toMatch(/^ERR_CONFIG_INVALID: \/etc\/sigil\/sigil\.yaml: listen\.port: /);
  });

  it('a catalogue that names an upstream the configuration lacks: ERR_CATALOGUE_INVALID', async () => {
    const error = await startFailure({ upstreams: NO_ENGINE, models: [{ id: 'm', upstream: 'absent' }] });
    expect({ code: error.code, name: error.name }).toEqual({ code: 'ERR_CATALOGUE_INVALID', name: 'CatalogueError' });
    expect(error.message).toMatch(/absent/);
  });

  it('a TLS key file that cannot be read: ERR_TLS, with the message that names it', async () => {
    const error = await startFailure({
      upstreams: NO_ENGINE,
      models: [{ id: 'm' }],
      config: { tls: { mode: 'files', cert_file: '/nonexistent/cert.pem', key_file: '/nonexistent/key.pem' } },
    });
    expect({ code: error.code, name: error.name }).toEqual({ code: 'ERR_TLS', name: 'TlsError' });
    expect(error.message).toMatch(/^tls\.key_file: cannot read \/nonexistent\/key\.pem \(ENOENT\)/);
  });

  it('a receipt signing key that is not EC P-256: ERR_SIGNING_KEY', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sigil-key-')), 'receipt-key.pem');
    writeFileSync(file, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const error = await startFailure({ upstreams: NO_ENGINE, models: [{ id: 'm' }], config: { receipts: { key_source: 'file', key_file: file } } });
    expect({ code: error.code, name: error.name }).toEqual({ code: 'ERR_SIGNING_KEY', name: 'SigningKeyError' });
  });

  it('a SIGIL_REPLICA_ID that cannot name a replica: ERR_CONFIG_INVALID', async () => {
    const before = process.env.SIGIL_REPLICA_ID;
    process.env.SIGIL_REPLICA_ID = 'pod 1/with spaces';
    try {
      const error = await startFailure({ upstreams: NO_ENGINE, models: [{ id: 'm' }], config: { fleet: { redis_url: 'redis://127.0.0.1:9' } } });
      expect({ code: error.code, message: error.message }).toEqual({
        code: 'ERR_CONFIG_INVALID',
        message: 'SIGIL_REPLICA_ID must be 1-64 letters, digits, dots, dashes or underscores',
      });
    } finally {
      if (before === undefined) delete process.env.SIGIL_REPLICA_ID;
      else process.env.SIGIL_REPLICA_ID = before;
    }
  });
});
