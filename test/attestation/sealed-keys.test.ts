import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import koffi from 'koffi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConfigfsTsmProvider } from '../../src/attestation/configfs-tsm.ts';
import type { AttestationProvider } from '../../src/attestation/provider.ts';
import { deriveSevGuestKey } from '../../src/attestation/sev-guest-key.ts';
import { verifyCommand } from '../../src/cli/verify.ts';
import type { AttestationDocumentV2 } from '../../src/protocol/attestation.ts';
import { verifyAttestationDocument } from '../../src/verify/attestation.ts';
import type { Check } from '../../src/verify/check.ts';
import { keyOriginCheck } from '../../src/verify/key-origin.ts';
import { parseConfig } from '../../src/config/load.ts';
import { amdCertTable, buildSnpReport, createAmdTestChain, pinnedSnpReference, type AmdTestChain } from '../support/evidence-fixtures.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { FakeConfigfs } from './fake-configfs.ts';

const SOURCE = join(import.meta.dirname, '..', 'support', 'fake-sev-guest', 'fake-sev-guest.c');
const MEASUREMENT = Buffer.alloc(48, 0x5e);
const VCEK_ROOT = 'a1'.repeat(32);
let library: string;
let dir: string;
let amd: AmdTestChain;
let engine: TestEngine;
let lastFieldSelect: () => number | bigint;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sigil-fake-sev-guest-'));
  library = join(dir, 'libfake-sev-guest.so');
  // The stand-in includes the kernel's <linux/sev-guest.h>: the structure layouts and ioctl number are the kernel's.
  execFileSync('gcc', ['-shared', '-fPIC', '-Wall', '-Werror', '-o', library, SOURCE]);
  lastFieldSelect = koffi.load(library).func('uint64_t fake_sev_guest_last_field_select()') as () => number | bigint;
  amd = await createAmdTestChain();
  engine = await startTestEngine({ modelNames: ['m'] });
});

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

/** A stand-in /dev/sev-guest: the chip's root key and the guest's launch values, as the stand-in library reads them. */
function sevGuestDevice(name: string, values: { vcek?: string; measurement?: Buffer; policy?: string }): string {
  const path = join(dir, name);
  const lines = [
    `vcek ${values.vcek ?? VCEK_ROOT}`,
    `measurement ${(values.measurement ?? MEASUREMENT).toString('hex')}`,
    `policy ${values.policy ?? '30000'}`,
    `image_id ${'00'.repeat(16)}`,
    `family_id ${'00'.repeat(16)}`,
  ];
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

/** An SEV-SNP guest: configfs-tsm whose reports carry `measurement`, signed by the test VCEK. */
async function snpProvider(measurement: Uint8Array = MEASUREMENT): Promise<AttestationProvider> {
  const configfs = await FakeConfigfs.create({
    provider: 'sev_guest',
    makeEvidence: (inblob) => ({ outblob: buildSnpReport({ reportData: inblob, measurement }, amd.vcekKey), auxblob: amdCertTable(amd) }),
  });
  cleanups.push(() => configfs.dispose());
  return createConfigfsTsmProvider({ tsmPath: configfs.reportDir, fs: configfs });
}

async function startSealed(device: string, opts: { measurement?: Buffer; config?: Record<string, unknown> } = {}): Promise<TestSigil> {
  const sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: {
      tls: { mode: 'off', allow_plaintext: true },
      receipts: { key_source: 'sealed' },
      ehbp: { key_source: 'sealed' },
      ...opts.config,
      attestation: { sealing: { device }, ...(opts.config?.attestation as object) },
    },
    start: { attestationProvider: await snpProvider(opts.measurement), runtime: { execArgv: [], env: {} }, sevGuestLibrary: library },
  });
  cleanups.push(() => sigil.close(0));
  return sigil;
}

const failing = (checks: Check[]) => checks.filter((c) => !c.ok).map((c) => c.name);
const fresh = async (sigil: TestSigil) => (await (await fetch(`${sigil.url}/v1/verify/attestation?nonce=${'cd'.repeat(32)}`)).json()) as AttestationDocumentV2;
const kidOf = async (sigil: TestSigil) =>
  ((await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid);
const verify = async (sigil: TestSigil, doc: AttestationDocumentV2, measurement: Buffer = MEASUREMENT) =>
  verifyAttestationDocument(doc, {
    jwks: (await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: object[] },
    nonce: Buffer.from(doc.nonce, 'hex'),
    expectedMeasurement: measurement.toString('hex'),
    roots: amd.roots,
    reference: pinnedSnpReference(measurement, doc.binding.manifest_sha384!),
  });

const SEALED_DETAIL =
  "the receipt signing key is sealed to the enclave: the AMD SEV-SNP firmware derives it from the chip's own key (VCEK) and this guest's launch measurement and guest policy, so only a guest launched with the same values can have it; " +
  "the encrypted-body (HPKE) key is sealed to the enclave: the AMD SEV-SNP firmware derives it from the chip's own key (VCEK) and this guest's launch measurement and guest policy, so only a guest launched with the same values can have it";

describe('keys sealed to an SEV-SNP guest (a stand-in /dev/sev-guest built from test/support/fake-sev-guest)', () => {
  it('the same chip and measurement give the same receipt and HPKE keys on every start, and the binding says sealed', async () => {
    const device = sevGuestDevice('same', {});
    const first = await startSealed(device);
    const firstDoc = await fresh(first);
    const kids = await kidOf(first);
    await first.close(0);
    const second = await startSealed(device);
    const secondDoc = await fresh(second);
    expect(await kidOf(second)).toEqual(kids);
    expect(secondDoc.binding.hpke_key_config).toBe(firstDoc.binding.hpke_key_config);
    expect(secondDoc.binding.key_origin).toEqual({
      receipt: { origin: 'sealed', bound_to: 'sev-snp:vcek:measurement+policy' },
      tls: null,
      hpke: { origin: 'sealed', bound_to: 'sev-snp:vcek:measurement+policy' },
    });
    // GUEST_FIELD_SELECT: guest policy (bit 0) and measurement (bit 3).
    expect(BigInt(lastFieldSelect())).toBe(0b1001n);
    const checks = await verify(second, secondDoc);
    expect(failing(checks)).toEqual([]);
    expect(checks.find((c) => c.name === 'attestation.key_origin')).toEqual({ name: 'attestation.key_origin', ok: true, detail: SEALED_DETAIL });
  });

  it('a sealed log key: the same log identity across starts of the same code; other code is a new identity, refused on the old folder', async () => {
    const device = sevGuestDevice('log', {});
    const logDir = join(mkdtempSync(join(tmpdir(), 'sigil-sealed-log-')), 'log');
    const config = { transparency_log: { dir: logDir, key_source: 'sealed', batch_ms: 50 } };
    const binding = async (sigil: TestSigil) => (await fresh(sigil)).binding;
    const first = await startSealed(device, { config });
    const firstBinding = await binding(first);
    await first.close(0);
    const second = await startSealed(device, { config });
    const secondBinding = await binding(second);
    expect(secondBinding.transparency_log).toEqual(firstBinding.transparency_log);
    expect(secondBinding.key_origin.log).toEqual({ origin: 'sealed', bound_to: 'sev-snp:vcek:measurement+policy' });
    await second.close(0);
    // One key in log.json after two starts: the identity a witness is configured with.
    expect((JSON.parse(readFileSync(join(logDir, 'log.json'), 'utf8')) as { keys: string[] }).keys).toEqual([firstBinding.transparency_log!.vkey]);
    // New code (another measurement): its sealed state key cannot open the state the old code sealed, so it does not sign here.
    const upgraded = Buffer.alloc(48, 0x7a);
    await expect(startSealed(sevGuestDevice('log-upgraded', { measurement: upgraded }), { measurement: upgraded, config })).rejects.toThrow(
      `transparency_log: the log's state file ${logDir}.state was not written by this enclave (its seal does not verify): it was edited, or made by other code. ` +
        'A code upgrade is a new log identity (docs/log.md#identity): give transparency_log.dir and transparency_log.state new places (and transparency_log.origin a new name), and keep this folder for auditors (docs/log.md#rollback)',
    );
  });

  it('another measurement, another chip root key or another guest policy gives another key', async () => {
    const kid = await kidOf(await startSealed(sevGuestDevice('base', {})));
    const otherMeasurement = Buffer.alloc(48, 0x6f);
    expect(await kidOf(await startSealed(sevGuestDevice('measured', { measurement: otherMeasurement }), { measurement: otherMeasurement }))).not.toEqual(kid);
    expect(await kidOf(await startSealed(sevGuestDevice('chip', { vcek: 'b2'.repeat(32) })))).not.toEqual(kid);
    expect(await kidOf(await startSealed(sevGuestDevice('debug', { policy: 'b0000' })))).not.toEqual(kid);
  });

  it('sigil verify passes a service whose keys are sealed, and names what they are bound to', async () => {
    // Over TLS made in the enclave, as sigil verify asks: the TLS key is generated, the other two sealed.
    const sigil = await startSealed(sevGuestDevice('cli', {}), { config: { tls: { mode: 'self-signed', hostnames: ['127.0.0.1'] } } });
    let stdout = '';
    const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: () => undefined }, stdin: Readable.from([]), env: {}, roots: amd.roots };
    const code = await verifyCommand(
      ['-v', '--url', sigil.url, '--api-key', sigil.key, '--measurement', MEASUREMENT.toString('hex'), '--allow-unpinned-code'],
      io,
    );
    expect(stdout.split('\n').filter((l) => l.startsWith('FAIL'))).toEqual([]);
    expect(code).toBe(0);
    const [receipt, hpke] = SEALED_DETAIL.split('; ');
    expect(stdout).toContain(`PASS attestation.key_origin — ${receipt}; the TLS key was made inside the enclave; ${hpke}\n`);
  });

  it('a loaded receipt key on the same guest still fails the verifier', async () => {
    const planted = join(dir, 'planted.pem');
    writeFileSync(
      planted,
      (await import('node:crypto')).generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }),
    );
    const sigil = await startSealed(sevGuestDevice('loaded', {}), { config: { receipts: { key_source: 'file', key_file: planted } } });
    const doc = await fresh(sigil);
    expect(doc.binding.key_origin.receipt).toEqual({ origin: 'loaded', file: planted });
    expect(failing(await verify(sigil, doc))).toEqual(['attestation.key_origin']);
  });

  it('a sealed key outside an SEV-SNP guest stops the start, and so does a device that is not there', async () => {
    await expect(
      startTestSigil({
        upstreams: { e: { url: engine.baseUrl } },
        models: [{ id: 'm' }],
        config: { receipts: { key_source: 'sealed' } },
        start: { sevGuestLibrary: library },
      }),
    ).rejects.toThrow(
      "receipts.key_source: sealed keys are derived by the SEV-SNP firmware (/dev/sev-guest), and this machine's TEE is none; use generated keys",
    );
    await expect(startSealed(join(dir, 'no-such-device'))).rejects.toThrow(
      `cannot open ${join(dir, 'no-such-device')}: errno 2 (ENOENT); is this an SEV-SNP guest with the sev-guest driver loaded?`,
    );
  });

  it('a key sealed without the measurement, or declared sealed on other evidence, fails the check; the config refuses such a sealing', () => {
    const sealedTo = (boundTo: string) => ({ receipt: { origin: 'sealed', bound_to: boundTo }, tls: null, hpke: null });
    expect(keyOriginCheck(sealedTo('sev-snp:vcek:policy'), false, 'sev-snp')).toEqual({
      name: 'attestation.key_origin',
      ok: false,
      detail:
        'the receipt signing key is sealed to sev-snp:vcek:policy, which leaves out the launch measurement, so any guest on that chip could derive it: the enclave does not vouch that only it holds that key',
    });
    expect(keyOriginCheck(sealedTo('sev-snp:vcek:measurement'), false, 'tdx').detail).toBe(
      'the receipt signing key is declared sealed by the SEV-SNP firmware, but the evidence is tdx: the enclave does not vouch that only it holds that key',
    );
    expect(keyOriginCheck(sealedTo('tpm:srk'), false, 'sev-snp').ok).toBe(false);
    expect(() => parseConfig('listen: {port: 0}\nauth: {keys_file: k}\nattestation: {sealing: {bind_to: [policy]}}\n', 'sigil.yaml')).toThrow(
      'must include measurement: a key not bound to it can be derived by any guest on the same chip',
    );
    expect(() => parseConfig('listen: {port: 0}\nauth: {keys_file: k}\nreceipts: {key_source: sealed, key_file: k.pem}\n', 'sigil.yaml')).toThrow(
      'receipts.key_file is read only with key_source file, not sealed',
    );
  });

  it('the firmware refusing a request is reported with its status', () => {
    expect(() => deriveSevGuestKey(sevGuestDevice('no-vmrk', {}), { rootKey: 'vmrk', fields: ['measurement'] }, library)).toThrow(
      /refused the key request on .*: status 0x27 \(INVALID_KEY\)$/,
    );
  });

  it('the real C library answers an ordinary file with ENOTTY: the ioctl path is the one the kernel serves', () => {
    expect(() => deriveSevGuestKey(sevGuestDevice('plain-file', {}), { rootKey: 'vcek', fields: ['measurement'] })).toThrow(
      /^SNP_GET_DERIVED_KEY on .* failed: errno 25 \(ENOTTY\)/,
    );
  });
});
