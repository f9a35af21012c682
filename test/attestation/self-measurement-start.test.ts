import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConfigfsTsmProvider } from '../../src/attestation/configfs-tsm.ts';
import type { AttestationDocumentV2 } from '../../src/protocol/attestation.ts';
import { START_NONCE } from '../../src/protocol/attestation.ts';
import { verifyAttestationDocument } from '../../src/verify/attestation.ts';
import { buildTdxQuote, createIntelTestChain, type IntelTestChain } from '../support/evidence-fixtures.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { FakeConfigfs } from './fake-configfs.ts';
import { FakeSysfsRtmr } from './fake-sysfs-rtmr.ts';

const MRTD = Buffer.alloc(48, 0x4d);
const sha384 = (...parts: Uint8Array[]) => parts.reduce((h, p) => h.update(p), createHash('sha384')).digest();

let engine: TestEngine;
let intel: IntelTestChain;
let dir: string;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  intel = await createIntelTestChain();
  dir = await mkdtemp(join(tmpdir(), 'sigil-selfmeasure-start-'));
});

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

async function start(tee: 'tdx' | 'none', refuse?: string): Promise<{ sigil: TestSigil; rtmr: FakeSysfsRtmr }> {
  const rtmr = await FakeSysfsRtmr.create();
  rtmr.refuse = refuse;
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
  const provider = tee === 'tdx' ? await createConfigfsTsmProvider({ tsmPath: configfs.reportDir, fs: configfs }) : undefined;
  const sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: {
      tls: { mode: 'off', allow_plaintext: true },
      attestation: {
        rtmr_path: rtmr.rtmrPath,
        ccel_table_path: join(dir, 'no-CCEL'),
        ccel_data_path: join(dir, 'no-CCEL-data'),
        runtime_log_path: join(rtmr.root, 'run/rtmr-events.json'),
      },
    },
    start: { rtmrFs: rtmr, ...(provider === undefined ? {} : { attestationProvider: provider }) },
  });
  cleanups.push(() => sigil.close(0));
  return { sigil, rtmr };
}

const startEvidence = async (sigil: TestSigil) => (await (await fetch(`${sigil.url}/v1/verify/attestation`)).json()) as AttestationDocumentV2;

describe('sigil serve on TDX measures itself into RTMR3 before making the start evidence', () => {
  it('extends once; the start document carries the event, and its quote replays to it', async () => {
    const { sigil, rtmr } = await start('tdx');
    const doc = await startEvidence(sigil);
    expect(rtmr.writes).toHaveLength(1);
    const [event] = doc.event_log!.runtime_events;
    expect(doc.event_log!.self_measurement).toEqual({ extended: true, reason: null });
    expect(doc.event_log!.ccel_data).toBeNull();
    expect(Buffer.from(rtmr.writes[0]!).toString('hex')).toBe(event!.digest);
    expect(event!.digest).toBe(sha384(Buffer.from(event!.payload)).toString('hex'));
    const payload = JSON.parse(event!.payload) as Record<string, unknown>;
    expect(payload).toEqual({
      kind: 'sigil-event/2',
      seq: 0,
      reason: 'start',
      at: payload.at,
      manifest_sha384: doc.binding.manifest_sha384,
      policy_hash: doc.binding.policy_hash,
    });
    expect(doc.binding.runtime_events_sha384).toEqual([event!.digest]);
    expect(sigil.logs.some((l) => l.includes('Sigil measured itself into RTMR3') && l.includes(event!.digest))).toBe(true);

    const jwks = (await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: object[] };
    const checks = await verifyAttestationDocument(doc, { jwks, nonce: START_NONCE, expectedMeasurement: MRTD.toString('hex'), roots: intel.roots });
    expect(checks.filter((c) => !c.ok).map((c) => c.name)).toEqual([]);
    expect(checks.find((c) => c.name === 'eventlog.rtmr3')).toMatchObject({ ok: true });
    // A fresh document (with a nonce) publishes the same event: RTMR3 is extended once, at start.
    const fresh = (await (await fetch(`${sigil.url}/v1/verify/attestation?nonce=${'ab'.repeat(32)}`)).json()) as AttestationDocumentV2;
    expect(fresh.event_log).toEqual(doc.event_log);
    expect(rtmr.writes).toHaveLength(1);
  });

  it('when the kernel refuses, the document says why and Sigil still serves', async () => {
    const { sigil, rtmr } = await start('tdx', 'EROFS');
    const doc = await startEvidence(sigil);
    expect(doc.event_log).toEqual({
      ccel_table: null,
      ccel_data: null,
      runtime_events: [],
      self_measurement: {
        extended: false,
        reason: `writing RTMR3 (${rtmr.rtmrPath}) was refused (EROFS): Sigil needs write access to it: the quote proves the firmware and boot chain, not which proxy runs`,
      },
    });
    expect(rtmr.writes).toEqual([]);
    expect(sigil.logs.some((l) => l.includes('Sigil could not measure itself into RTMR3'))).toBe(true);
    expect((await fetch(`${sigil.url}/v1/models`, { headers: { authorization: `Bearer ${sigil.key}` } })).status).toBe(200);
  });

  it('without TDX nothing is extended; without hardware the event is listed, and says it is not measured', async () => {
    const { sigil, rtmr } = await start('none');
    const doc = await startEvidence(sigil);
    expect(doc.event_log?.self_measurement).toEqual({ extended: false, reason: 'no hardware: the events are listed, not measured' });
    expect(doc.event_log?.runtime_events.map((e) => e.digest)).toEqual(doc.binding.runtime_events_sha384);
    expect(JSON.parse(doc.event_log!.runtime_events[0]!.payload)).toMatchObject({ reason: 'start', manifest_sha384: doc.binding.manifest_sha384 });
    expect(rtmr.writes).toEqual([]);
  });
});
