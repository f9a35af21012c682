import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verifyCommand } from '../../src/cli/verify.ts';
import { describeCheck } from '../../src/verify/check-registry.ts';
import type { VerifyReport } from '../../src/cli/verify.ts';
import { MEASUREMENT, makeSigner, messageClaims } from './receipt-fixtures.ts';
import { SIGIL_FROM_SOURCES, runSigilVerify } from '../support/cli.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { gpuEntry, rimText, VECTOR_NONCE, VECTOR_TIME } from '../support/gpu-fixtures.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { gpuEvidenceSha256, reportDataV2, type AttestationDocumentV2 } from '../../src/protocol/attestation.ts';

/** The measurement a service without a TEE states: all zero. */
const NONE_MEASUREMENT = '0'.repeat(96);
const NO_TEE = 'no hardware evidence exists: this service is not running in a TEE';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  /** `[PASS|FAIL, name]` of each printed check line. */
  lines: Array<[string, string]>;
}

async function sigilVerify(argv: string[], opts: { stdin?: string; env?: Record<string, string> } = {}): Promise<Run> {
  const { code, stdout, stderr } = await runSigilVerify(argv, opts);
  const lines = stdout
    .split('\n')
    .map((l) => /^(PASS|FAIL|WAIVED|----) (\S+) — /.exec(l))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m): [string, string] => [m[1]!, m[2]!]);
  return { code, stdout, stderr, lines };
}

const failed = (r: Run) => r.lines.filter(([s]) => s === 'FAIL').map(([, n]) => n);

/** The service's checks, in the core's order (the channel, the document, the policy), then the live request and its receipt. */
const SERVICE_CHECKS = [
  'attestation.tls_key',
  'attestation.tee',
  'attestation.nonce',
  'attestation.report_data',
  'attestation.jwks',
  'attestation.manifest',
  'gpu.evidence',
  'attestation.policy',
];
const RECEIPT_CHECKS = [
  'receipt.jwks',
  'receipt.signature',
  'receipt.claims',
  'receipt.schema_version',
  'receipt.receipt_type',
  'receipt.nonce',
  'receipt.measurement',
  'receipt.policy_hash',
  'receipt.endpoint',
  'receipt.model',
  'receipt.completion_id',
  'receipt.request_hash',
  'receipt.response_hash',
  'receipt.issued_at',
  'receipt.tee',
  'policy.model',
];
const LIVE_JSON_CHECKS = [...SERVICE_CHECKS, 'live.request', ...RECEIPT_CHECKS];
/** What fails for a development service reached over plain HTTP; --allow-no-tee accepts it. */
const NO_TEE_FAILED = ['attestation.tls_key', 'attestation.tee', 'receipt.tee'];
/** What --allow-no-tee accepts: those, and the manifest the service reports (no hardware vouches for it, nothing pins it). */
const NO_TEE_WAIVED = ['attestation.tls_key', 'attestation.tee', 'attestation.manifest', 'receipt.tee'];
const ALLOW_NO_TEE = '--allow-no-tee: a development service without hardware';
const NO_TEE_DOCUMENT = 'tee is "none": no hardware evidence exists, this service is not running in a hardware enclave and nothing it says is vouched for';

/** Sigil itself, tee none over plain HTTP (bodies unsealed, as a development service serves them), and a proxy in front of it for the faults Sigil never makes. */
let engine: TestEngine;
let sigil: TestSigil;
let proxy: ForgingProxy;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm1' }],
    config: {
      attestation: { provider: 'none' },
      ehbp: { enabled: false },
      log: { level: 'silent' },
      // Every test asks for a fresh attestation from this one address, faster than the default allowance refills (10, then 5 a second).
      limits: { fresh_attestation_burst: 1000 },
    },
  });
  proxy = await startForgingProxy(sigil.url);
});
afterAll(async () => {
  await proxy.close();
  await sigil.close(0);
  await engine.close();
});
beforeEach(() => proxy.reset());

const CHAT = '/v1/chat/completions';
/** Changes the first byte of the first word of the answer (JSON or stream) on its way to the client, after Sigil hashed it. */
const tamperAnswer = () => {
  proxy.rewrite = (method, path) =>
    method === 'POST' && path === CHAT
      ? (body) => {
          const copy = Buffer.from(body);
          const at = copy.indexOf('"content":"') + '"content":"'.length;
          copy[at] = copy[at] === 0x4a ? 0x4b : 0x4a;
          return copy;
        }
      : undefined;
};

describe('sigil verify against a live service (tee none)', () => {
  it('passes every check of a JSON completion with --allow-no-tee, and still says there is no TEE', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--allow-no-tee']);
    expect(r.stderr).toBe('');
    // What --allow-no-tee accepts is printed as WAIVED with the reason, never as PASS, and never counted as passed.
    expect(r.lines).toEqual(LIVE_JSON_CHECKS.map((name) => [NO_TEE_WAIVED.includes(name) ? 'WAIVED' : 'PASS', name]));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`WAIVED receipt.tee — tee is "none": ${NO_TEE} (waived: ${ALLOW_NO_TEE})`);
    expect(r.stdout).toContain(`WAIVED attestation.tee — ${NO_TEE_DOCUMENT} (waived: ${ALLOW_NO_TEE})`);
    expect(
      r.stdout.endsWith(
        `verified with waivers: ${LIVE_JSON_CHECKS.length - 4} checks passed; 4 waived (attestation.tls_key, attestation.tee, attestation.manifest, receipt.tee)\n`,
      ),
    ).toBe(true);
    expect(r.stdout).toMatch(
      /\nWAIVED attestation\.manifest — manifest [0-9a-f]{96} is reported, not hardware-backed \(tee none: only the process says so\); /,
    );
  });

  it("prints each run of checks under the check registry's title and plain words, as the trust page shows them", async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--allow-no-tee']);
    const receipt = describeCheck('receipt.signature')!;
    expect(r.stdout).toContain(`\n# ${receipt.title}: ${receipt.explains} (${receipt.doc})\nPASS receipt.jwks — `);
    const headings = r.stdout.split('\n').filter((l) => l.startsWith('# '));
    expect(headings).toHaveLength(new Set(LIVE_JSON_CHECKS.map((n) => describeCheck(n)!.title)).size);
    for (const name of LIVE_JSON_CHECKS)
      expect(headings).toContain(`# ${describeCheck(name)!.title}: ${describeCheck(name)!.explains} (${describeCheck(name)!.doc})`);
  });

  it('fails without --allow-no-tee, exactly on the three no-TEE checks', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key]);
    expect(r.code).toBe(1);
    // Plain HTTP and no TEE: the TLS key, the receipt and the evidence all say there is nothing attested.
    expect(failed(r)).toEqual(NO_TEE_FAILED);
    expect(r.stdout).toContain('FAIL attestation.tls_key — the service was reached over plain HTTP');
    expect(r.stdout).toContain(`FAIL receipt.tee — tee is "none": ${NO_TEE}\n`);
    expect(r.stdout).toContain(`NOT VERIFIED: 3 of ${LIVE_JSON_CHECKS.length} checks failed; 1 not pinned, so compared with nothing (attestation.manifest)\n`);
  });

  it('fails response_hash when one response byte is changed in transit', async () => {
    tamperAnswer();
    const r = await sigilVerify(['--url', proxy.url, '--api-key', sigil.key, '--allow-no-tee']);
    expect(r.code).toBe(1);
    expect(failed(r)).toEqual(['receipt.response_hash']);
  });

  it('prints the verdict as an EAR with --format ear: waivers warn, never affirm', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--allow-no-tee', '--format', 'ear']);
    expect(r.code).toBe(0);
    const ear = JSON.parse(r.stdout) as {
      eat_profile: string;
      submods: Record<string, { ear_status: string; ear_trustworthiness_vector: Record<string, number> }>;
    };
    expect(ear.eat_profile).toBe('tag:ietf.org,2026:rats/ear#04');
    expect(ear.submods[sigil.url]).toMatchObject({ ear_status: 'warning', ear_trustworthiness_vector: { 'instance-identity': 32, hardware: 32 } });
  });

  it('checks a stream: the model receipt in the header, the message receipt after data: [DONE]', async () => {
    // Through the proxy, unchanged, to see the bytes on the wire.
    let sent: Buffer = Buffer.alloc(0);
    proxy.rewrite = (method, path) =>
      method === 'POST' && path === CHAT
        ? (body) => {
            sent = body;
            return body;
          }
        : undefined;
    const r = await sigilVerify(['--url', proxy.url, '--api-key', sigil.key, '--stream', '--model', 'm1', '--allow-no-tee']);
    expect(failed(r)).toEqual([]);
    expect(r.code).toBe(0);
    const names = r.lines.map(([, n]) => n);
    expect(names.filter((n) => n.startsWith('model_receipt.'))).toEqual([
      'model_receipt.jwks',
      'model_receipt.signature',
      'model_receipt.claims',
      'model_receipt.schema_version',
      'model_receipt.receipt_type',
      'model_receipt.nonce',
      'model_receipt.measurement',
      'model_receipt.policy_hash',
      'model_receipt.endpoint',
      'model_receipt.model',
      'model_receipt.issued_at',
      'model_receipt.tee',
    ]);
    expect(names).toContain('live.receipt_id');
    expect(r.stdout).toContain('message receipt from the stream comment');
    // The hashed bytes stop at data: [DONE]\n\n, exactly as the server hashed them.
    const done = sent.indexOf('data: [DONE]\n\n') + 'data: [DONE]\n\n'.length;
    expect(done).toBeGreaterThan(100);
    expect(sent.subarray(done).toString()).toMatch(/^: receipt [\w-]+\.[\w-]+\.[\w-]+\n\n$/);
    expect(r.stdout).toContain(`${done} response bytes`);
  });

  it('fails a stream whose bytes were changed', async () => {
    tamperAnswer();
    const r = await sigilVerify(['--url', proxy.url, '--api-key', sigil.key, '--stream', '--allow-no-tee']);
    expect(r.code).toBe(1);
    expect(failed(r)).toEqual(['receipt.response_hash']);
  });

  /** A proxy that drops the receipt comment off the end of the stream: the client must use GET /v1/receipts/{id}. */
  const dropStreamReceipt = () => {
    proxy.rewrite = (method, path) =>
      method === 'POST' && path === CHAT ? (body) => Buffer.from(body.toString().replace(/: receipt \S+\n\n$/, '')) : undefined;
  };

  it('falls back to GET /v1/receipts/{id} when the stream carries no receipt comment', async () => {
    dropStreamReceipt();
    const r = await sigilVerify(['--url', proxy.url, '--api-key', sigil.key, '--stream', '--allow-no-tee']);
    expect(failed(r)).toEqual([]);
    expect(r.stdout).toContain('message receipt from the receipts endpoint');
    expect(proxy.requests.filter((line) => line.startsWith('GET /v1/receipts/'))).toHaveLength(1);
  });

  it('cannot verify (exit 3) a stream that ends without a receipt when the service kept none', async () => {
    dropStreamReceipt();
    proxy.forge = (method, path) =>
      method === 'GET' && path.startsWith('/v1/receipts/')
        ? { status: 404, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: { message: 'no such receipt' } }) }
        : undefined;
    const r = await sigilVerify(['--url', proxy.url, '--api-key', sigil.key, '--stream', '--allow-no-tee']);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      /^sigil verify: could not verify: the stream carries no ": receipt <JWS>" comment, and the receipts endpoint has none \(GET http:\/\/127\.0\.0\.1:\d+\/v1\/receipts\/[0-9a-f-]+: HTTP 404: no such receipt\)\n$/,
    );
  });

  it('fails attestation.nonce when the attestation answers another nonce', async () => {
    // The proxy asks Sigil for a document for another nonce than the client's: a genuine document, but not fresh for this client.
    proxy.redirect = (method, path) => (path.startsWith('/v1/verify/attestation?') ? path.replace(/nonce=[0-9a-f]+/, `nonce=${'ee'.repeat(32)}`) : path);
    const r = await sigilVerify(['--url', proxy.url, '--api-key', sigil.key, '--allow-no-tee']);
    expect(r.code).toBe(1);
    expect(failed(r)).toEqual(['attestation.nonce', 'attestation.report_data']);
  });

  it('fails measurement checks when the user expects a real measurement', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--allow-no-tee', '--measurement', 'AB'.repeat(48)]);
    expect(r.code).toBe(1);
    expect(failed(r)).toEqual(['attestation.measurement', 'receipt.measurement']);
  });

  it('prints a JSON report with --json', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--json']);
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as VerifyReport;
    const jwks = (await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: Array<{ kid: string }> };
    expect(report.ok).toBe(false);
    expect(report.mode).toBe('live');
    expect(report.kid).toBe(jwks.keys[0]!.kid);
    expect(report.claims?.tee).toBe('none');
    expect(report.checks.map((c) => c.name)).toEqual(LIVE_JSON_CHECKS);
    expect(report.checks.find((c) => c.name === 'attestation.tee')).toEqual({ name: 'attestation.tee', ok: false, detail: NO_TEE_DOCUMENT });
  });

  it('takes the API key from SIGIL_API_KEY and never prints it, even when it is refused', async () => {
    const ok = await sigilVerify(['--url', sigil.url, '--allow-no-tee'], { env: { SIGIL_API_KEY: sigil.key } });
    expect(ok.code).toBe(0);
    expect(ok.stdout + ok.stderr).not.toContain(sigil.key);
    const wrong = await sigilVerify(['--url', sigil.url, '--api-key', 'sk-wrong-key-do-not-print']);
    expect(wrong.code).toBe(3);
    expect(wrong.stderr).toBe(`sigil verify: could not verify: POST ${sigil.url}/v1/chat/completions: HTTP 401: Incorrect API key provided.\n`);
    expect(wrong.stdout + wrong.stderr).not.toContain('sk-wrong-key-do-not-print');
  });
});

describe('sigil verify RECEIPT_FILE', () => {
  let dir: string;
  let files: { receipt: string; request: string; response: string; jwks: string; policy: string };
  /** One exchange with Sigil as a client keeps it: the receipt, and the exact bytes sent and received. */
  let exchange: { receipt: string; requestBytes: Buffer; responseBytes: Buffer };
  const nonce = 'client-nonce-42';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sigil-verify-'));
    const requestBytes = Buffer.from('{"model":"m1","messages":[{"role":"user","content":"hi"}]}');
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true', 'x-service-nonce': nonce },
      body: requestBytes,
    });
    expect(res.status).toBe(200);
    exchange = { receipt: res.headers.get('x-service-receipt')!, requestBytes, responseBytes: Buffer.from(await res.arrayBuffer()) };
    files = {
      receipt: join(dir, 'receipt.jws'),
      request: join(dir, 'req.json'),
      response: join(dir, 'res.json'),
      jwks: join(dir, 'jwks.json'),
      policy: join(dir, 'policy.json'),
    };
    writeFileSync(files.receipt, exchange.receipt + '\n');
    writeFileSync(files.request, exchange.requestBytes);
    writeFileSync(files.response, exchange.responseBytes);
    writeFileSync(files.jwks, await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).text());
    writeFileSync(files.policy, await (await fetch(`${sigil.url}/v1/verify/policy`)).text());
  });

  it('passes with --url, the nonce sent and the exact bytes', async () => {
    const r = await sigilVerify([
      files.receipt,
      '--url',
      sigil.url,
      '--nonce',
      nonce,
      '--request',
      files.request,
      '--response',
      files.response,
      '--allow-no-tee',
    ]);
    expect(failed(r)).toEqual([]);
    expect(r.code).toBe(0);
    expect(r.lines.map(([, n]) => n)).toEqual([...SERVICE_CHECKS, ...RECEIPT_CHECKS.filter((n) => n !== 'receipt.model' && n !== 'receipt.completion_id')]);
  });

  it('fails on a response file with one byte changed', async () => {
    const tampered = Buffer.from(exchange.responseBytes);
    tampered[tampered.length - 2] = 0x30;
    writeFileSync(join(dir, 'tampered.json'), tampered);
    const r = await sigilVerify([
      files.receipt,
      '--url',
      sigil.url,
      '--nonce',
      nonce,
      '--request',
      files.request,
      '--response',
      join(dir, 'tampered.json'),
      '--allow-no-tee',
    ]);
    expect(r.code).toBe(1);
    expect(failed(r)).toEqual(['receipt.response_hash']);
  });

  it('fails the nonce when --nonce is left out (the receipt must then carry "")', async () => {
    const r = await sigilVerify([files.receipt, '--url', sigil.url, '--request', files.request, '--response', files.response, '--allow-no-tee']);
    expect(failed(r)).toEqual(['receipt.nonce']);
  });

  it('reads the receipt from stdin and, offline, reports what it could not check as failures', async () => {
    const r = await sigilVerify(['-', '--jwks', files.jwks, '--nonce', nonce, '--allow-no-tee'], { stdin: exchange.receipt });
    expect(r.code).toBe(1);
    expect(failed(r)).toEqual(['receipt.measurement', 'receipt.policy_hash', 'receipt.request_hash', 'receipt.response_hash']);
    expect(r.stdout).toContain('FAIL receipt.measurement — not checked: give --measurement HEX or --url BASE\n');
  });

  it('passes offline with --jwks, --measurement, --policy and the bytes', async () => {
    const r = await sigilVerify(
      [
        '-',
        '--jwks',
        files.jwks,
        '--nonce',
        nonce,
        '--measurement',
        NONE_MEASUREMENT,
        '--policy',
        files.policy,
        '--request',
        files.request,
        '--response',
        files.response,
        '--allow-no-tee',
      ],
      { stdin: exchange.receipt },
    );
    expect(failed(r)).toEqual([]);
    expect(r.code).toBe(0);
  });

  it('checks a saved start-evidence document offline with --attestation', async () => {
    const doc = await (await fetch(`${sigil.url}/v1/verify/attestation`)).text();
    writeFileSync(join(dir, 'start.json'), doc);
    const base = [
      '-',
      '--jwks',
      files.jwks,
      '--nonce',
      nonce,
      '--policy',
      files.policy,
      '--request',
      files.request,
      '--response',
      files.response,
      '--attestation',
      join(dir, 'start.json'),
    ];
    const r = await sigilVerify(base, { stdin: exchange.receipt });
    expect(failed(r)).toEqual(['attestation.tee', 'receipt.tee']);
    // A saved document came over no connection this run made: its TLS key is waived as offline, never passed.
    expect(r.lines.slice(0, 5)).toEqual([
      ['WAIVED', 'attestation.tls_key'],
      ['FAIL', 'attestation.tee'],
      ['PASS', 'attestation.nonce'],
      ['PASS', 'attestation.report_data'],
      ['PASS', 'attestation.jwks'],
    ]);
    expect(r.stdout).toContain('PASS attestation.nonce — the document is the start evidence (all-zero nonce): not fresh\n');
    expect((await sigilVerify([...base, '--allow-no-tee'], { stdin: exchange.receipt })).code).toBe(0);
    expect((await sigilVerify([files.receipt, '--url', sigil.url, '--attestation', join(dir, 'start.json')])).code).toBe(2);
  });

  it("verifies a document's GPU evidence against the RIMs of --reference", async () => {
    const doc = JSON.parse(await (await fetch(`${sigil.url}/v1/verify/attestation`)).text()) as AttestationDocumentV2;
    const entry = gpuEntry();
    doc.nonce = VECTOR_NONCE;
    doc.gpu_evidence = [entry];
    doc.binding.gpu_evidence_sha256 = [gpuEvidenceSha256(entry)];
    doc.report_data = Buffer.from(reportDataV2(Buffer.from(VECTOR_NONCE, 'hex'), doc.binding)).toString('hex');
    writeFileSync(join(dir, 'gpu.json'), JSON.stringify(doc));
    writeFileSync(join(dir, 'driver.swidtag'), rimText('driver-rim-test.swidtag'));
    writeFileSync(join(dir, 'vbios.swidtag'), rimText('vbios-rim-test.swidtag'));
    writeFileSync(join(dir, 'reference.yaml'), 'gpu:\n  rims: [driver.swidtag, vbios.swidtag]\n');
    let stdout = '';
    const code = await verifyCommand(
      [
        '-v',
        '-',
        '--jwks',
        files.jwks,
        '--nonce',
        nonce,
        '--policy',
        files.policy,
        '--request',
        files.request,
        '--response',
        files.response,
        '--attestation',
        join(dir, 'gpu.json'),
        '--reference',
        join(dir, 'reference.yaml'),
        '--allow-no-tee',
      ],
      {
        stdout: { write: (t: string) => (stdout += t) },
        stderr: { write: () => true },
        stdin: Readable.from([Buffer.from(exchange.receipt)]),
        env: {},
        now: VECTOR_TIME,
      },
    );
    expect(code).toBe(1);
    const lines = stdout
      .split('\n')
      .filter((l) => l.startsWith('PASS gpu') || l.startsWith('FAIL gpu') || l.startsWith('---- gpu'))
      .map((l) => l.split(' — ')[0]);
    expect(lines).toEqual([
      'PASS gpu.binding',
      'PASS gpu.rim[0].signature',
      'PASS gpu.rim[0].schema',
      'PASS gpu.rim[0].chain',
      '---- gpu.rim[0].revocation',
      'PASS gpu.rim[1].signature',
      'PASS gpu.rim[1].schema',
      'PASS gpu.rim[1].chain',
      '---- gpu.rim[1].revocation',
      'PASS gpu[0].report',
      'PASS gpu[0].certificates',
      'PASS gpu[0].signature',
      'PASS gpu[0].chain',
      'PASS gpu[0].root',
      'PASS gpu[0].fwid',
      'PASS gpu[0].nonce',
      'FAIL gpu[0].driver_rim',
      'FAIL gpu[0].vbios_rim',
      'FAIL gpu[0].measurements',
      '---- gpu[0].revocation',
    ]);
    expect(stdout).toContain('FAIL gpu[0].driver_rim — no verified RIM describes driver 550.90.07 (verified driver RIMs: 545.00)\n');
  });

  it('reports hardware evidence as not checked for a TEE receipt verified offline without --attestation', async () => {
    // A receipt a TEE service signed (receipt-fixtures' claims), verified with its signer's JWKS.
    const signer = await makeSigner();
    const teeReceipt = join(dir, 'tee.jws');
    writeFileSync(teeReceipt, signer.sign(messageClaims()));
    writeFileSync(join(dir, 'tee-jwks.json'), JSON.stringify({ keys: [signer.publicJwk] }));
    writeFileSync(join(dir, 'policy1.json'), '{"policy":1}');
    const r = await sigilVerify([
      teeReceipt,
      '--jwks',
      join(dir, 'tee-jwks.json'),
      '--nonce',
      'n-123',
      '--measurement',
      MEASUREMENT,
      '--policy',
      join(dir, 'policy1.json'),
    ]);
    expect(r.code).toBe(1);
    expect(failed(r)).toEqual(['receipt.request_hash', 'receipt.response_hash', 'policy.model', 'attestation.document']);
    expect(r.stdout).toContain('FAIL attestation.document — not checked: give --attestation FILE or --url BASE\n');
  });

  it('fails the signature against a JWKS without the signing key', async () => {
    const stranger = await makeSigner();
    writeFileSync(join(dir, 'other.json'), JSON.stringify({ keys: [stranger.publicJwk] }));
    const r = await sigilVerify([files.receipt, '--jwks', join(dir, 'other.json')]);
    expect(r.code).toBe(1);
    expect(r.lines).toEqual([
      ['PASS', 'receipt.jwks'],
      ['FAIL', 'receipt.signature'],
    ]);
  });

  it('exits 2 on bad usage and 3 when the service cannot be reached', async () => {
    expect((await sigilVerify([])).code).toBe(2);
    expect((await sigilVerify([files.receipt])).code).toBe(2);
    expect((await sigilVerify(['--url', sigil.url])).code).toBe(2);
    expect((await sigilVerify([files.receipt, '--jwks', files.jwks, '--stream'])).code).toBe(2);
    expect((await sigilVerify(['--help'])).code).toBe(0);
    const down = await sigilVerify([files.receipt, '--url', 'http://127.0.0.1:9', '--json']);
    expect(down.code).toBe(3);
    expect((JSON.parse(down.stdout) as { error: { code: string } }).error.code).toBe('ERR_VERIFY_FETCH');
    expect((await sigilVerify([join(dir, 'missing.jws'), '--jwks', files.jwks])).code).toBe(3);
  });

  it('runs through the sigil dispatcher as a child process', async () => {
    const child = spawn(
      process.execPath,
      [
        ...SIGIL_FROM_SOURCES,
        'verify',
        '-v',
        files.receipt,
        '--jwks',
        files.jwks,
        '--nonce',
        nonce,
        '--measurement',
        NONE_MEASUREMENT,
        '--policy',
        files.policy,
        '--request',
        files.request,
        '--response',
        files.response,
      ],
      {
        cwd: join(import.meta.dirname, '..', '..'),
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(out).toContain(`FAIL receipt.tee — tee is "none": ${NO_TEE}\n`);
    expect(code).toBe(1);
  });
});
