import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { runSigilVerify } from '../support/cli.ts';
import { sigilConnect } from '../support/connect-command.ts';

/** `sigil connect` as a command: what it refuses before anything is sent, a run with --audit-dir, and `sigil verify --audit` over it. */
let engine: TestEngine;
let plain: TestSigil;
let unsealed: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  plain = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
  unsealed = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { ehbp: { enabled: false } } });
});
afterAll(async () => {
  await plain.close(0);
  await unsealed.close(0);
  await engine.close();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

const sigilVerify = (argv: string[]): Promise<Run> => runSigilVerify(argv);

describe('sigil connect refuses to downgrade, before anything is sent', () => {
  it('prints its usage with --help', async () => {
    const run = await sigilConnect(['--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^usage: sigil connect \[options\] <URL>\n/);
    expect(run.stdout).toMatch(/^ {2}--listen <HOST:PORT> /m);
  });

  it('refuses plain http:// without --allow-insecure-http', async () => {
    const run = await sigilConnect([plain.url, '--allow-no-tee', '--listen', '127.0.0.1:0']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      `sigil connect: ${plain.url}: it is plain HTTP: anyone on the path can read and change the traffic (only a development service, --allow-no-tee, can be verified so). --allow-insecure-http accepts it\n`,
    );
  });

  it('refuses a development service without --allow-no-tee, printing the failed checks and the flag', async () => {
    const run = await sigilConnect([plain.url, '--allow-insecure-http', '--listen', '127.0.0.1:0']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('FAIL attestation.tee — tee is "none"');
    expect(run.stderr).toContain(
      `\nsigil connect: ${plain.url}: attestation.tls_key, attestation.tee, attestation.manifest did not pass: the service runs on no hardware enclave`,
    );
    expect(run.stderr).toMatch(/\. --allow-no-tee accepts it\n$/);
  });

  it('names every missing flag in one message: plain HTTP, no hardware, unsealed bodies', async () => {
    const run = await sigilConnect([unsealed.url, '--listen', '127.0.0.1:0']);
    expect(run.code).toBe(2);
    const message = run.stderr.slice(run.stderr.indexOf('sigil connect: '));
    expect(message).toBe(
      `sigil connect: ${unsealed.url} is accepted only with 3 flags, each a risk to take knowingly:\n` +
        '  --allow-insecure-http: it is plain HTTP: anyone on the path can read and change the traffic (only a development service, --allow-no-tee, can be verified so)\n' +
        '  --allow-no-tee: attestation.tls_key, attestation.tee, attestation.manifest did not pass: the service runs on no hardware enclave, so nothing vouches for its code or keys: anyone who runs a copy can sign the same answers (fine for a development service on your own machine)\n' +
        '  --allow-unsealed-bodies: it offers no attested HPKE key, so request bodies could not be sealed to the enclave (EHBP): they would be protected only by TLS ending in the enclave\n',
    );
  });

  it('says its own port is taken, before contacting the service', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const run = await sigilConnect(['http://127.0.0.1:9', '--listen', `127.0.0.1:${port}`]);
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(
        `sigil connect: --listen 127.0.0.1:${port}: port ${port} on this machine is already in use, perhaps by another sigil connect. Stop that process, or choose another port: --listen 127.0.0.1:0 takes any free one\n`,
      );
    } finally {
      taken.close();
    }
  });

  it('refuses a service that offers no attested HPKE key without --allow-unsealed-bodies', async () => {
    const run = await sigilConnect([unsealed.url, '--allow-insecure-http', '--allow-no-tee', '--listen', '127.0.0.1:0']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      `sigil connect: ${unsealed.url}: it offers no attested HPKE key, so request bodies could not be sealed to the enclave (EHBP): they would be protected only by TLS ending in the enclave. --allow-unsealed-bodies accepts it\n`,
    );
  });

  it('listens on loopback only', async () => {
    const run = await sigilConnect([plain.url, '--allow-insecure-http', '--allow-no-tee', '--listen', '0.0.0.0:0']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^sigil connect: --listen 0\.0\.0\.0: sigil connect listens on loopback only/);
  });
});

describe('sigil connect beyond loopback, from the command line', () => {
  it('needs the local token and the service key from its environment with --expose-to-network', async () => {
    const run = await sigilConnect([plain.url, '--allow-insecure-http', '--allow-no-tee', '--listen', '0.0.0.0:0', '--expose-to-network']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^sigil connect: --expose-to-network needs SIGIL_CONNECT_TOKEN: the local token every app must send as its API key\n/);
  });
});

describe('sigil connect --reattest-every and --fresh-report', () => {
  it('refuses a duration outside 10s to 24h, or one without a unit, as bad usage', async () => {
    for (const value of ['5s', '25h', '30', '1d', '']) {
      const run = await sigilConnect([plain.url, '--allow-insecure-http', '--allow-no-tee', '--reattest-every', value]);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(new RegExp(`^sigil connect: --reattest-every is a duration from 10s to 24h, e\\.g\\. 30m or 1h; not "${value}"\n`));
    }
  });

  it('renews the verdict at the interval given, asks fresh reports, and says what freshness rests on', async () => {
    const run = await sigilConnect(
      [plain.url, '--allow-insecure-http', '--allow-no-tee', '--listen', '127.0.0.1:0', '--reattest-every', '90s', '--fresh-report'],
      async (running) => {
        const status = running.status();
        expect(Date.parse(status.renewal.next_reattestation) - Date.parse(status.attested_at)).toBe(90_000);
        expect(status.freshness).toBe('no hardware report: nothing vouches for freshness (a development service)');
        expect(running.fetch.attestation.freshness).toBe('fresh report');
      },
    );
    expect(run.code).toBe(0);
  });
});

describe('sigil connect tells the person running it', () => {
  it('of each answer it did not pass on, by path and failed check, never its content', async () => {
    const proxy = await startForgingProxy(unsealed.url);
    proxy.rewrite = (method, path) =>
      method === 'POST' && path === '/v1/chat/completions' ? (body) => Buffer.from(body.toString('utf8').replace('Hello', 'Howdy')) : undefined;
    try {
      let status = 0;
      const run = await sigilConnect(
        [proxy.url, '--allow-insecure-http', '--allow-no-tee', '--allow-unsealed-bodies', '--listen', '127.0.0.1:0'],
        async (running) => {
          const answer = await fetch(`${running.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${unsealed.key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'a private prompt' }] }),
          });
          status = answer.status;
          await answer.text();
        },
      );
      expect(status).toBe(502);
      expect(run.code).toBe(0);
      expect(run.stderr).toBe('sigil connect: JSON answer to /v1/chat/completions NOT passed on: receipt.response_hash\n');
    } finally {
      await proxy.close();
    }
  });
});

describe('sigil connect --audit-dir, then sigil verify --audit', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-audit-'));
  const flags = (url: string) => [url, '--allow-insecure-http', '--allow-no-tee', '--listen', '127.0.0.1:0', '--audit-dir', dir];

  it('keeps every receipt with the evidence it was verified against, and verify --audit checks them again offline', async () => {
    const run = await sigilConnect(flags(plain.url), async (running) => {
      const client = new OpenAI({ baseURL: `${running.url}/v1`, apiKey: plain.key, maxRetries: 0 });
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'audited' }] });
      const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'audited stream' }] });
      for await (const chunk of stream) void chunk;
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/sigil connect: http:\/\/127\.0\.0\.1:\d+ verified; point your client at http:\/\/127\.0\.0\.1:\d+\/v1/);
    const receipts = readdirSync(join(dir, 'receipts'));
    expect(receipts).toHaveLength(2);
    expect(readdirSync(join(dir, 'evidence'))).toHaveLength(1);
    expect(statSync(join(dir, 'receipts', receipts[0]!)).mode & 0o777).toBe(0o600);

    const audit = await sigilVerify(['--audit', dir, '--allow-no-tee']);
    expect(audit.stderr).toBe('');
    expect(audit.code).toBe(0);
    expect(audit.stdout).toMatch(/^== evidence\/[0-9a-f]{64}\.json: http:\/\/127\.0\.0\.1:\d+, attested .*, 2 receipt\(s\)$/m);
    expect(audit.stdout).toMatch(/^-- receipts\/.*\.json \(JSON \/v1\/chat\/completions; connect said verified\)$/m);
    expect(audit.stdout).toMatch(/^-- receipts\/.*\.json \(stream \/v1\/chat\/completions; connect said verified\)$/m);
    expect(audit.stdout.match(/^PASS receipt\.response_hash/gm)).toHaveLength(2);
    expect(audit.stdout).toMatch(/^PASS attestation\.ohttp_key — /m);
    expect(audit.stdout).toMatch(/^audit: 1 attestation\(s\), 2 receipt\(s\): verified with waivers: /m);
  });

  it('fails a kept answer that was changed afterwards, naming the receipt and the check', async () => {
    const file = join(dir, 'receipts', readdirSync(join(dir, 'receipts')).sort()[0]!);
    const record = JSON.parse(readFileSync(file, 'utf8')) as { exchange: { response: string } };
    const text = Buffer.from(record.exchange.response, 'base64').toString('utf8').replace(engine.reply, 'a different answer');
    record.exchange.response = Buffer.from(text).toString('base64');
    writeFileSync(file, JSON.stringify(record));
    const audit = await sigilVerify(['--audit', dir, '--allow-no-tee']);
    expect(audit.code).toBe(1);
    expect(audit.stdout).toMatch(/^FAIL receipt\.response_hash — /m);
    expect(audit.stdout).toMatch(/^audit: 1 attestation\(s\), 2 receipt\(s\): NOT VERIFIED: 1 of \d+ checks failed/m);
  });

  it('says an empty or missing directory cannot be audited', async () => {
    const audit = await sigilVerify(['--audit', join(dir, 'nothing-here')]);
    expect(audit.code).toBe(3);
    expect(audit.stderr).toBe(`sigil verify: could not verify: cannot read the audit directory ${join(dir, 'nothing-here')}: ENOENT\n`);
  });
});
