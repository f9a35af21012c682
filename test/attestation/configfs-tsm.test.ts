import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createConfigfsTsmProvider, TsmError } from '../../src/attestation/configfs-tsm.ts';
import { makeAttestationDocument, NO_GPUS } from '../../src/attestation/document.ts';
import { selectAttestationProvider } from '../../src/attestation/select.ts';
import { verifyAttestationDocument } from '../../src/verify/attestation.ts';
import {
  amdCertTable,
  buildSnpReport,
  buildTdxQuote,
  createAmdTestChain,
  createIntelTestChain,
  testJwks,
  type AmdTestChain,
  type IntelTestChain,
  TEST_START_EVENT,
} from '../support/evidence-fixtures.ts';
import { FakeConfigfs } from './fake-configfs.ts';

const MEASUREMENT = Buffer.alloc(48, 0x3c);
const MRTD = Buffer.alloc(48, 0x4d);

let amd: AmdTestChain;
let intel: IntelTestChain;
const fakes: FakeConfigfs[] = [];

beforeAll(async () => {
  amd = await createAmdTestChain();
  intel = await createIntelTestChain();
});

afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.dispose()));
});

async function snpMachine(extra: { interfereTimes?: number; reportData?: Uint8Array } = {}): Promise<FakeConfigfs> {
  const fake = await FakeConfigfs.create({
    provider: 'sev_guest',
    interfereTimes: extra.interfereTimes,
    makeEvidence: (inblob) => ({
      outblob: buildSnpReport({ reportData: extra.reportData ?? inblob, measurement: MEASUREMENT }, amd.vcekKey),
      auxblob: amdCertTable(amd),
    }),
  });
  fakes.push(fake);
  return fake;
}

async function tdxMachine(): Promise<FakeConfigfs> {
  const fake = await FakeConfigfs.create({
    provider: 'tdx_guest',
    makeEvidence: (inblob) => ({ outblob: buildTdxQuote({ reportData: inblob, mrTd: MRTD }, intel) }),
  });
  fakes.push(fake);
  return fake;
}

const reportData = new Uint8Array(64).map((_, i) => i);

describe('configfs-tsm provider', () => {
  it('on an SNP guest: writes the report data to inblob, returns outblob, auxblob and MEASUREMENT, and removes its entry', async () => {
    const fake = await snpMachine();
    const provider = await createConfigfsTsmProvider({ tsmPath: fake.reportDir, fs: fake });
    expect(provider.tee).toBe('sev-snp');
    const evidence = await provider.collect(reportData);
    expect(evidence.tee).toBe('sev-snp');
    expect(evidence.measurement).toBe(MEASUREMENT.toString('hex'));
    expect(evidence.outblob).toHaveLength(0x4a0);
    expect(Buffer.from(evidence.auxblob)).toEqual(Buffer.from(amdCertTable(amd)));
    expect(Buffer.from(evidence.reportData)).toEqual(Buffer.from(reportData));
    expect(fake.inblobs.map((b) => Buffer.from(b))).toEqual([Buffer.from(reportData)]);
    // One entry for the probe at creation, one for the report; both gone.
    expect(fake.created).toHaveLength(2);
    expect(fake.removed).toEqual(fake.created);
    expect(await fake.entries()).toEqual([]);
  });

  it('on a TDX guest: returns the quote, no auxblob, and MRTD as the measurement', async () => {
    const fake = await tdxMachine();
    const provider = await createConfigfsTsmProvider({ tsmPath: fake.tsmPath, expect: 'tdx', fs: fake });
    const evidence = await provider.collect(reportData);
    expect(evidence.tee).toBe('tdx');
    expect(evidence.measurement).toBe(MRTD.toString('hex'));
    expect(evidence.auxblob).toHaveLength(0);
    expect(await fake.entries()).toEqual([]);
  });

  it('starts over in a fresh entry when the generation changed under it', async () => {
    const fake = await snpMachine({ interfereTimes: 1 });
    const provider = await createConfigfsTsmProvider({ tsmPath: fake.reportDir, fs: fake });
    const evidence = await provider.collect(reportData);
    expect(evidence.measurement).toBe(MEASUREMENT.toString('hex'));
    expect(fake.inblobs).toHaveLength(2);
    expect(fake.created).toHaveLength(3);
    expect(new Set(fake.created).size).toBe(3);
    expect(await fake.entries()).toEqual([]);
  });

  it('gives up with ERR_TSM_CONFLICT when every attempt is disturbed, leaving no entry behind', async () => {
    const fake = await snpMachine({ interfereTimes: 100 });
    const provider = await createConfigfsTsmProvider({ tsmPath: fake.reportDir, fs: fake, maxAttempts: 3 });
    await expect(provider.collect(reportData)).rejects.toMatchObject({ code: 'ERR_TSM_CONFLICT' });
    expect(fake.inblobs).toHaveLength(3);
    expect(await fake.entries()).toEqual([]);
  });

  it('refuses evidence that does not carry the report data it was given, and still removes the entry', async () => {
    const fake = await snpMachine({ reportData: new Uint8Array(64).fill(1) });
    const provider = await createConfigfsTsmProvider({ tsmPath: fake.reportDir, fs: fake });
    await expect(provider.collect(reportData)).rejects.toMatchObject({ code: 'ERR_TSM_REPORT_DATA' });
    expect(await fake.entries()).toEqual([]);
  });

  it('refuses report data that is not 64 bytes', async () => {
    const fake = await snpMachine();
    const provider = await createConfigfsTsmProvider({ tsmPath: fake.reportDir, fs: fake });
    await expect(provider.collect(new Uint8Array(32))).rejects.toThrow('report data must be 64 bytes, got 32');
  });

  it('its evidence makes an attestation document that the verifier accepts end to end', async () => {
    const fake = await snpMachine();
    const provider = await createConfigfsTsmProvider({ tsmPath: fake.reportDir, fs: fake });
    const jwks = testJwks();
    const nonce = new Uint8Array(32).fill(0x5a);
    const parts = { jwks, policyHash: 'sha256:' + '22'.repeat(32), tlsSpkiSha256: null, hpkeKeyConfig: null };
    const eventLog = { ccel_table: null, ccel_data: null, runtime_events: [TEST_START_EVENT], self_measurement: { extended: false, reason: null } };
    const sources = {
      provider,
      collectGpuEvidence: NO_GPUS,
      eventLog,
      manifestSha384: '4d'.repeat(48),
      keyOrigin: { receipt: { origin: 'generated' as const }, tls: null, hpke: null },
    };
    const { document: doc } = await makeAttestationDocument(
      sources,
      { ...parts, policyHash: JSON.parse(TEST_START_EVENT.payload).policy_hash as string },
      nonce,
    );
    const checks = await verifyAttestationDocument(JSON.parse(JSON.stringify(doc)), {
      jwks,
      nonce,
      expectedMeasurement: MEASUREMENT.toString('hex'),
      roots: amd.roots,
    });
    expect(checks.filter((c) => !c.ok)).toEqual([]);
    expect(checks.filter((c) => c.pinned !== false)).toHaveLength(16);
  });
});

describe('selecting the attestation provider', () => {
  it('a configured sev-snp provider that is absent fails, naming the path and the provider', async () => {
    const missing = '/nonexistent/sigil-test/tsm/report';
    await expect(selectAttestationProvider({ provider: 'sev-snp', tsmPath: missing })).rejects.toThrow(
      'attestation provider sev-snp: no configfs-tsm at /nonexistent/sigil-test/tsm/report',
    );
    await expect(selectAttestationProvider({ provider: 'tdx', tsmPath: missing })).rejects.toBeInstanceOf(TsmError);
  });

  it('a configured provider that the machine does not offer fails, naming both', async () => {
    const fake = await tdxMachine();
    await expect(selectAttestationProvider({ provider: 'sev-snp', tsmPath: fake.reportDir, fs: fake })).rejects.toThrow(
      `attestation provider sev-snp: ${fake.reportDir} is served by "tdx_guest", not sev-snp (sev_guest)`,
    );
  });

  it('auto picks what the machine has, without a warning', async () => {
    const snp = await snpMachine();
    const tdx = await tdxMachine();
    const a = await selectAttestationProvider({ provider: 'auto', tsmPath: snp.reportDir, fs: snp });
    const b = await selectAttestationProvider({ provider: 'auto', tsmPath: tdx.reportDir, fs: tdx });
    expect([a.provider.tee, a.warning, b.provider.tee, b.warning]).toEqual(['sev-snp', undefined, 'tdx', undefined]);
  });

  it('auto without configfs-tsm falls back to none, with a warning that says so', async () => {
    const selected = await selectAttestationProvider({ provider: 'auto', tsmPath: '/nonexistent/sigil-test/tsm/report' });
    expect(selected.provider.tee).toBe('none');
    expect(selected.warning).toBe(
      'attestation provider auto found no configfs-tsm at /nonexistent/sigil-test/tsm/report; falling back to none: attestation provider is none: no hardware evidence, receipts carry tee "none" and an all-zero measurement (development only)',
    );
  });

  it('auto on a configfs-tsm of an unknown provider fails rather than falling back', async () => {
    const fake = await FakeConfigfs.create({ provider: 'arm_cca_guest', makeEvidence: () => ({ outblob: new Uint8Array(0) }) });
    fakes.push(fake);
    await expect(selectAttestationProvider({ provider: 'auto', tsmPath: fake.tsmPath, fs: fake })).rejects.toMatchObject({ code: 'ERR_TSM_PROVIDER' });
  });

  it('none is none, with the development warning', async () => {
    const selected = await selectAttestationProvider({ provider: 'none', tsmPath: '/unused' });
    expect(selected.provider.tee).toBe('none');
    expect(selected.warning).toContain('development only');
  });
});
