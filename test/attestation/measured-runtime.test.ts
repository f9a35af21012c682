import { createHash, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConfigfsTsmProvider } from '../../src/attestation/configfs-tsm.ts';
import type { ProcessRuntime } from '../../src/attestation/runtime-options.ts';
import type { AttestationDocumentV2 } from '../../src/protocol/attestation.ts';
import { verifyAttestationDocument } from '../../src/verify/attestation.ts';
import type { Check } from '../../src/verify/check.ts';
import { parseReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { buildTdxQuote, createIntelTestChain, type IntelTestChain } from '../support/evidence-fixtures.ts';
import { startTestSigil, type CatalogueModelSpec, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { FakeConfigfs } from './fake-configfs.ts';
import { FakeSysfsRtmr } from './fake-sysfs-rtmr.ts';

const MRTD = Buffer.alloc(48, 0x4d);
const CLEAN: ProcessRuntime = { execArgv: [], env: {} };
let engine: TestEngine;
let intel: IntelTestChain;
let dir: string;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  intel = await createIntelTestChain();
  dir = await mkdtemp(join(tmpdir(), 'sigil-measured-'));
});

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

interface FakeTdx {
  rtmr: FakeSysfsRtmr;
  start: (opts?: { runtime?: ProcessRuntime; config?: Record<string, unknown>; models?: CatalogueModelSpec[] }) => Promise<TestSigil>;
}

/** A TDX machine: configfs-tsm whose quotes carry RTMR3 as the fake sysfs holds it at that moment. */
async function fakeTdx(): Promise<FakeTdx> {
  const rtmr = await FakeSysfsRtmr.create();
  cleanups.push(() => rtmr.dispose());
  const configfs = await FakeConfigfs.create({
    provider: 'tdx_guest',
    makeEvidence: (inblob) => ({
      outblob: buildTdxQuote(
        { reportData: inblob, mrTd: MRTD, rtmrs: [new Uint8Array(48), new Uint8Array(48), new Uint8Array(48), readFileSync(rtmr.rtmrPath)] },
        intel,
      ),
    }),
  });
  cleanups.push(() => configfs.dispose());
  const provider = await createConfigfsTsmProvider({ tsmPath: configfs.reportDir, fs: configfs });
  return {
    rtmr,
    start: async (opts = {}) => {
      const sigil = await startTestSigil({
        upstreams: { e: { url: engine.baseUrl } },
        models: opts.models ?? [{ id: 'm' }],
        config: {
          tls: { mode: 'off', allow_plaintext: true },
          attestation: {
            rtmr_path: rtmr.rtmrPath,
            ccel_table_path: join(dir, 'no-CCEL'),
            ccel_data_path: join(dir, 'no-CCEL-data'),
            runtime_log_path: join(rtmr.root, 'run/rtmr-events.json'),
          },
          ...opts.config,
        },
        start: { rtmrFs: rtmr, attestationProvider: provider, runtime: opts.runtime ?? CLEAN },
      });
      cleanups.push(() => sigil.close(0));
      return sigil;
    },
  };
}

const failing = (checks: Check[]) => checks.filter((c) => !c.ok).map((c) => c.name);
const fresh = async (sigil: TestSigil) => (await (await fetch(`${sigil.url}/v1/verify/attestation?nonce=${'ab'.repeat(32)}`)).json()) as AttestationDocumentV2;
const jwksOf = async (sigil: TestSigil) => (await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: object[] };
const verify = async (sigil: TestSigil, doc: AttestationDocumentV2, extra: Partial<Parameters<typeof verifyAttestationDocument>[1]> = {}) =>
  verifyAttestationDocument(doc, {
    jwks: await jwksOf(sigil),
    nonce: Buffer.from(doc.nonce, 'hex'),
    expectedMeasurement: MRTD.toString('hex'),
    roots: intel.roots,
    ...extra,
  });

async function chatReceipt(sigil: TestSigil): Promise<{ policy_hash: string; iat: number }> {
  const res = await fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return decodeJwt(res.headers.get('x-service-receipt')!) as unknown as { policy_hash: string; iat: number };
}

describe('a runtime option that would run unmeasured code stops the start on a TEE', () => {
  it('a preload in NODE_OPTIONS is refused with a message naming it', async () => {
    const tdx = await fakeTdx();
    await expect(tdx.start({ runtime: { execArgv: [], env: { NODE_OPTIONS: '--require ./hook.cjs' } } })).rejects.toThrow(
      'refusing to start on tdx: --require ./hook.cjs (NODE_OPTIONS) would run code or open a debugger the measurement does not cover, so the evidence would not name what handles prompts. Start Sigil without it.',
    );
    expect(tdx.rtmr.writes).toEqual([]);
  });

  it('an inspector on the node command line and an LD_PRELOAD are each named', async () => {
    const tdx = await fakeTdx();
    await expect(tdx.start({ runtime: { execArgv: ['--inspect=127.0.0.1:9229'], env: { LD_PRELOAD: '/tmp/tap.so' } } })).rejects.toThrow(
      'refusing to start on tdx: --inspect=127.0.0.1:9229 (node command line), LD_PRELOAD=/tmp/tap.so (environment) would run code',
    );
  });

  it('a non-empty /etc/ld.so.preload is refused, naming the libraries it preloads; an empty one starts', async () => {
    const tdx = await fakeTdx();
    const preload = join(dir, 'ld.so.preload');
    await writeFile(preload, '/usr/lib/tap.so\n');
    await expect(tdx.start({ runtime: { ...CLEAN, ldSoPreloadPath: preload } })).rejects.toThrow(
      `refusing to start on tdx: ${preload} listing /usr/lib/tap.so would run code or open a debugger the measurement does not cover`,
    );
    expect(tdx.rtmr.writes).toEqual([]);
    await writeFile(preload, '\n');
    const sigil = await tdx.start({ runtime: { ...CLEAN, ldSoPreloadPath: preload } });
    expect((await fresh(sigil)).binding.manifest_sha384).toMatch(/^[0-9a-f]{96}$/);
  });

  it('an inspector already open (a SIGUSR1 sent before Sigil could ignore it) is refused', async () => {
    const tdx = await fakeTdx();
    await expect(tdx.start({ runtime: { ...CLEAN, inspectorUrl: 'ws://127.0.0.1:9229/0f0e' } })).rejects.toThrow(
      'refusing to start on tdx: the inspector open at ws://127.0.0.1:9229/0f0e (a SIGUSR1 reached node before Sigil could ignore it) would run code',
    );
  });

  it("Node's permission model starts and is measured; its one right that opens the inspector is refused", async () => {
    const tdx = await fakeTdx();
    const confined = ['--permission', `--allow-fs-read=${dir}`, `--allow-fs-write=${dir}`];
    await expect(tdx.start({ runtime: { ...CLEAN, execArgv: [...confined, '--allow-inspector'] } })).rejects.toThrow(
      'refusing to start on tdx: --allow-inspector (node command line) would run code or open a debugger',
    );
    const sigil = await tdx.start({ runtime: { ...CLEAN, execArgv: confined } });
    expect(failing(await verify(sigil, await fresh(sigil)))).toEqual([]);
  });

  it('a measured option that runs no foreign code starts, and the manifest names it', async () => {
    const tdx = await fakeTdx();
    const sigil = await tdx.start({ runtime: { execArgv: ['--max-old-space-size=512'], env: { NODE_OPTIONS: '--max-http-header-size=16384' } } });
    const doc = await fresh(sigil);
    expect(failing(await verify(sigil, doc))).toEqual([]);
    expect(doc.binding.manifest_sha384).toMatch(/^[0-9a-f]{96}$/);
  });
});

describe('a catalogue reload is a measured event', () => {
  it('appears as a replayed event, and a receipt signed after it names the new policy', async () => {
    const tdx = await fakeTdx();
    const sigil = await tdx.start();
    const before = await chatReceipt(sigil);
    const startDoc = await fresh(sigil);
    const catalogue = join(sigil.dir, 'models.yaml');
    await writeFile(catalogue, (await readFile(catalogue, 'utf8')).replace('sha256:' + '01'.repeat(32), 'sha256:' + '02'.repeat(32)));
    expect(await sigil.reload()).toEqual({ keys: true, catalogue: true });

    const after = await chatReceipt(sigil);
    expect(after.policy_hash).not.toBe(before.policy_hash);
    const doc = await fresh(sigil);
    expect(tdx.rtmr.writes).toHaveLength(2);
    expect(doc.event_log!.runtime_events.map((e) => (JSON.parse(e.payload) as { reason: string; policy_hash: string }).reason)).toEqual(['start', 'reload']);
    expect(doc.binding.runtime_events_sha384).toEqual(doc.event_log!.runtime_events.map((e) => e.digest));
    expect(doc.binding.policy_hash).toBe(after.policy_hash);
    expect(doc.binding.manifest_sha384).not.toBe(startDoc.binding.manifest_sha384);

    const checks = await verify(sigil, doc, { receipt: after });
    expect(failing(checks)).toEqual([]);
    expect(checks.find((c) => c.name === 'eventlog.rtmr3')!.ok).toBe(true);
    expect(checks.find((c) => c.name === 'attestation.events')!.detail).toBe(
      '2 runtime event(s) replayed in order (start, reload); the last names the manifest and policy the enclave binds now',
    );
    expect(checks.find((c) => c.name === 'receipt.event')!.detail).toMatch(
      new RegExp(`^the receipt's policy ${after.policy_hash} is the one measured by event 1 \\(reload at `),
    );
    // The receipt signed before the reload is tied to the start event, not to the state that replaced it.
    const old = (await verify(sigil, doc, { receipt: before })).find((c) => c.name === 'receipt.event')!;
    expect(old.ok).toBe(true);
    // A receipt claiming the old policy after the reload is not covered by the event then in force.
    const forged = (await verify(sigil, doc, { receipt: { policy_hash: before.policy_hash, iat: after.iat + 1 } })).find((c) => c.name === 'receipt.event')!;
    expect(forged).toMatchObject({ ok: false });
  });

  it('a reload that cannot be measured is refused, and the old state keeps serving', async () => {
    const tdx = await fakeTdx();
    const sigil = await tdx.start();
    const policyBefore = (await chatReceipt(sigil)).policy_hash;
    const catalogue = join(sigil.dir, 'models.yaml');
    await writeFile(catalogue, (await readFile(catalogue, 'utf8')).replace('sha256:' + '01'.repeat(32), 'sha256:' + '03'.repeat(32)));
    tdx.rtmr.refuse = 'EIO';
    expect(await sigil.reload()).toEqual({ keys: true, catalogue: false });
    expect((await chatReceipt(sigil)).policy_hash).toBe(policyBefore);
    const doc = await fresh(sigil);
    expect(doc.event_log!.runtime_events).toHaveLength(1);
    expect(
      sigil.logs.some(
        (l) =>
          l.includes('catalogue not reloaded (a reload that cannot be measured is refused)') &&
          l.includes(`extending RTMR3 through ${tdx.rtmr.rtmrPath} failed (EIO)`),
      ),
    ).toBe(true);
  });
});

describe('key origin', () => {
  it('a receipt key loaded from a file is declared loaded, and fails the verifier unless the reference values accept it', async () => {
    const planted = join(dir, 'planted-receipt-key.pem');
    await writeFile(planted, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }));
    const tdx = await fakeTdx();
    const sigil = await tdx.start({ config: { receipts: { key_file: planted } } });
    const doc = await fresh(sigil);
    expect(doc.binding.key_origin).toEqual({ receipt: { origin: 'loaded', file: planted }, tls: null, hpke: { origin: 'generated' } });
    const checks = await verify(sigil, doc);
    expect(failing(checks)).toEqual(['attestation.key_origin']);
    expect(checks.find((c) => c.name === 'attestation.key_origin')!.detail).toBe(
      `the receipt signing key was loaded from ${planted}: a file the operator controls, so the operator may hold the same key and sign or decrypt outside the enclave (accept this only with sigil.accept_loaded_keys in the reference values)`,
    );
    const accepted = await verify(sigil, doc, { reference: parseReferenceValues('sigil:\n  accept_loaded_keys: true\n') });
    expect(failing(accepted)).toEqual([]);
  });

  it('keys made in the enclave are declared generated and pass', async () => {
    const tdx = await fakeTdx();
    const sigil = await tdx.start();
    const doc = await fresh(sigil);
    expect(doc.binding.key_origin).toEqual({ receipt: { origin: 'generated' }, tls: null, hpke: { origin: 'generated' } });
    expect((await verify(sigil, doc)).find((c) => c.name === 'attestation.key_origin')).toEqual({
      name: 'attestation.key_origin',
      ok: true,
      detail: 'the receipt signing key was made inside the enclave; the encrypted-body (HPKE) key was made inside the enclave',
    });
  });
});

describe('measured model weights', () => {
  it('a weights file one byte off stops the start, naming the model and both digests', async () => {
    const weights = join(dir, 'model.gguf');
    const bytes = Buffer.alloc(3 << 20, 7);
    const declared = 'sha256:' + createHash('sha256').update(bytes).digest('hex');
    bytes[12345] = 8;
    await writeFile(weights, bytes);
    const actual = 'sha256:' + createHash('sha256').update(bytes).digest('hex');
    const tdx = await fakeTdx();
    await expect(tdx.start({ models: [{ id: 'm', model_hash: declared, weights }] })).rejects.toThrow(
      `model m: its weights ${weights} hash to ${actual}, not the catalogue's model_hash ${declared}: refusing to serve weights other than the ones declared`,
    );
  });

  it('matching weights start, and the manifest counts the model as measured', async () => {
    const weights = join(dir, 'good.gguf');
    const bytes = Buffer.alloc(1 << 20, 9);
    await writeFile(weights, bytes);
    const tdx = await fakeTdx();
    const sigil = await tdx.start({ models: [{ id: 'm', model_hash: 'sha256:' + createHash('sha256').update(bytes).digest('hex'), weights }] });
    expect(sigil.logs.some((l) => l.includes('hashing model weights') && l.includes('"total_mb":1'))).toBe(true);
  });
});
