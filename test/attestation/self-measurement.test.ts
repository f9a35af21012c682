import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConfigfsTsmProvider } from '../../src/attestation/configfs-tsm.ts';
import { makeAttestationDocument, NO_GPUS } from '../../src/attestation/document.ts';
import { codeManifest } from '../../src/attestation/file-manifest.ts';
import { MeasurementError, RuntimeEventLog, runtimeEvent, runtimeEventPayload, type SelfMeasurementOptions } from '../../src/attestation/self-measurement.ts';
import { START_NONCE, type EventLog } from '../../src/protocol/attestation.ts';
import { verifyAttestationDocument } from '../../src/verify/attestation.ts';
import type { Check } from '../../src/verify/check.ts';
import { buildTdxQuote, createIntelTestChain, testJwks, type IntelTestChain } from '../support/evidence-fixtures.ts';
import { FakeConfigfs } from './fake-configfs.ts';
import { FakeSysfsRtmr } from './fake-sysfs-rtmr.ts';

const sha384 = (...parts: Uint8Array[]) => parts.reduce((h, p) => h.update(p), createHash('sha384')).digest();
const sha256 = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');
const ZERO = new Uint8Array(48);
const POLICY_HASH = 'sha256:' + '22'.repeat(32);
// The real CCEL of a dstack CVM (test/vectors/tdx) and its RTMR0/1, replayed independently when the vector was added.
const CCEL = readFileSync(new URL('../vectors/tdx/dstack-ccel.bin', import.meta.url));
const CCEL_RTMR0 = Buffer.from('274c2344116db7c663470693b5ba62b8621eac28cb41d2f816ddf188f9f423f900a1c44d32386fd3c993dc814e62af9d', 'hex');
const CCEL_RTMR1 = Buffer.from('bdcf4ee0f7fdfe7c73fbb19ded73193aee23a6726b86d3b282ea097cf4c9ed7a0db21b5c1ccd513e410d90e310836b26', 'hex');

/** A CCEL ACPI table (56 bytes, checksum zero) describing a TDX log area of `logLength` bytes. */
function ccelTable(logLength: number): Buffer {
  const t = Buffer.alloc(56);
  t.write('CCEL', 0, 'latin1');
  t.writeUInt32LE(56, 4);
  t[8] = 1;
  t.write('SIGIL ', 10, 'latin1');
  t[36] = 2; // Intel TDX
  t.writeBigUInt64LE(BigInt(logLength), 40);
  t.writeBigUInt64LE(0x7f000000n, 48);
  t[9] = (256 - (t.reduce((a, b) => a + b, 0) & 0xff)) & 0xff;
  return t;
}
const TABLE = ccelTable(CCEL.length);

let work: string;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'sigil-selfmeasure-'));
  // A small installed tree: dist/ with nested files, a node_modules Node would load from, a symbolic link to follow.
  await mkdir(join(work, 'pkg/dist/http'), { recursive: true });
  await mkdir(join(work, 'pkg/dist/node_modules/x'), { recursive: true });
  await writeFile(join(work, 'pkg/package.json'), JSON.stringify({ name: 'sigil', version: '9.8.7' }));
  await writeFile(join(work, 'pkg/dist/main.js'), 'console.log("main");\n');
  await writeFile(join(work, 'pkg/dist/http/start.js'), 'export const start = 1;\n');
  await writeFile(join(work, 'pkg/dist/Zeta.js'), 'z\n');
  await writeFile(join(work, 'pkg/dist/node_modules/x/index.js'), 'loadable, so measured\n');
  await writeFile(join(work, 'shared.js'), 'linked\n');
  await symlink(join(work, 'shared.js'), join(work, 'pkg/dist/linked.js'));
  await writeFile(join(work, 'sigil.yaml'), 'listen: { port: 8443 }\n');
  await writeFile(join(work, 'CCEL'), TABLE);
  await writeFile(join(work, 'CCEL-data'), CCEL);
});

afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
  await rm(work, { recursive: true, force: true });
});

async function sysfs(opts: Parameters<typeof FakeSysfsRtmr.create>[0] = {}): Promise<FakeSysfsRtmr> {
  const fake = await FakeSysfsRtmr.create(opts);
  cleanups.push(() => fake.dispose());
  return fake;
}

type Options = SelfMeasurementOptions & { policyHash?: string };
const AT = new Date('2026-01-01T00:00:00Z');
const MANIFEST_SHA384 = '6d'.repeat(48);

/** One start: open the log, record the start event (a refusal is said in the log, as at a real start). */
async function measureSelfIntoRtmr3(o: Options): Promise<EventLog> {
  const log = await RuntimeEventLog.open('tdx', o);
  await log.record({ reason: 'start', manifestSha384: MANIFEST_SHA384, policyHash: o.policyHash ?? POLICY_HASH, at: AT }).catch((err: unknown) => {
    if (!(err instanceof MeasurementError)) throw err;
  });
  return log.eventLog();
}

function options(fake: FakeSysfsRtmr, extra: Partial<Options> = {}): Options {
  return {
    rtmrPath: fake.rtmrPath,
    ccelTablePath: join(work, 'CCEL'),
    ccelDataPath: join(work, 'CCEL-data'),
    runtimeLogPath: join(fake.root, 'run/sigil/rtmr-events.json'),
    fs: fake,
    ...extra,
  };
}

const MANIFEST = [
  `${sha256('z\n')}  Zeta.js\n`,
  `${sha256('export const start = 1;\n')}  http/start.js\n`,
  `${sha256('linked\n')}  linked.js\n`,
  `${sha256('console.log("main");\n')}  main.js\n`,
  `${sha256('loadable, so measured\n')}  node_modules/x/index.js\n`,
].join('');

describe('the code manifest', () => {
  it('lists every file under the code folder as sha256sum does, sorted bytewise, node_modules included, following links', async () => {
    expect(await codeManifest(join(work, 'pkg/dist'))).toBe(MANIFEST);
  });

  it('is what the auditor command in docs/auditing.md prints', async () => {
    const cmd = "find -L . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum";
    const out = execFileSync('bash', ['-c', cmd], { cwd: join(work, 'pkg/dist'), encoding: 'utf8' });
    expect(out).toBe(await codeManifest(join(work, 'pkg/dist')));
  });

  it('changes when one byte of the code changes', async () => {
    await writeFile(join(work, 'pkg/dist/http/start.js'), 'export const start = 2;\n');
    try {
      expect(await codeManifest(join(work, 'pkg/dist'))).not.toBe(MANIFEST);
    } finally {
      await writeFile(join(work, 'pkg/dist/http/start.js'), 'export const start = 1;\n');
    }
  });
});

describe('the payload', () => {
  it('is canonical JSON of the sequence number, the reason, the time, the manifest digest and the policy hash; its digest is SHA-384 of it', () => {
    const payload = runtimeEventPayload({ seq: 0, reason: 'start', at: AT.toISOString(), manifest_sha384: MANIFEST_SHA384, policy_hash: POLICY_HASH });
    expect(payload).toBe(
      `{"at":"2026-01-01T00:00:00.000Z","kind":"sigil-event/2","manifest_sha384":"${MANIFEST_SHA384}","policy_hash":"${POLICY_HASH}","reason":"start","seq":0}`,
    );
    expect(runtimeEvent(payload)).toEqual({ imr: 3, event: 'sigil', digest: sha384(Buffer.from(payload)).toString('hex'), payload });
  });
});

describe('measuring Sigil into RTMR3 (fake sysfs)', () => {
  const expectedPayload = () =>
    runtimeEventPayload({ seq: 0, reason: 'start', at: AT.toISOString(), manifest_sha384: MANIFEST_SHA384, policy_hash: POLICY_HASH });

  it('extends RTMR3 once with the 48-byte SHA-384 of the payload, and publishes the event and the CCEL', async () => {
    const fake = await sysfs();
    const log = await measureSelfIntoRtmr3(options(fake));
    const payload = expectedPayload();
    const digest = sha384(Buffer.from(payload));
    expect(fake.writes).toEqual([new Uint8Array(digest)]);
    expect(await fake.value()).toEqual(sha384(ZERO, digest));
    expect(log).toEqual({
      ccel_table: TABLE.toString('base64'),
      ccel_data: CCEL.toString('base64'),
      runtime_events: [{ imr: 3, event: 'sigil', digest: digest.toString('hex'), payload }],
      self_measurement: { extended: true, reason: null },
    });
    expect(JSON.parse(await readFile(join(fake.root, 'run/sigil/rtmr-events.json'), 'utf8'))).toEqual(log.runtime_events);
  });

  it('after a restart in the same VM publishes the earlier event too, so RTMR3 still replays', async () => {
    const fake = await sysfs();
    await measureSelfIntoRtmr3(options(fake));
    const log = await measureSelfIntoRtmr3(options(fake, { policyHash: 'sha256:' + '33'.repeat(32) }));
    expect(fake.writes).toHaveLength(2);
    expect(log.runtime_events).toHaveLength(2);
    const replayed = log.runtime_events.reduce<Uint8Array>((r, e) => sha384(r, Buffer.from(e.digest, 'hex')), ZERO);
    expect(await fake.value()).toEqual(Buffer.from(replayed));
    expect(JSON.parse(log.runtime_events[1]!.payload)).toMatchObject({ policy_hash: 'sha256:' + '33'.repeat(32) });
  });

  it('without the sysfs attribute says so in words, extends nothing and creates no file', async () => {
    const fake = await sysfs({ absent: true });
    const log = await measureSelfIntoRtmr3(options(fake));
    expect(log.runtime_events).toEqual([]);
    expect(log.self_measurement).toEqual({
      extended: false,
      reason: `the kernel exposes no writable RTMR3 (${fake.rtmrPath} is absent; the TDX guest driver offers it from Linux 6.16): the quote proves the firmware and boot chain, not which proxy runs`,
    });
    expect(existsSync(fake.rtmrPath)).toBe(false);
    expect(log.ccel_data).toBe(CCEL.toString('base64'));
  });

  it('when the kernel refuses the write says so, and publishes no event', async () => {
    const fake = await sysfs();
    fake.refuse = 'EACCES';
    const log = await measureSelfIntoRtmr3(options(fake));
    expect(log.runtime_events).toEqual([]);
    expect(log.self_measurement).toEqual({
      extended: false,
      reason: `writing RTMR3 (${fake.rtmrPath}) was refused (EACCES): Sigil needs write access to it: the quote proves the firmware and boot chain, not which proxy runs`,
    });
    expect(await fake.value()).toEqual(Buffer.from(ZERO));
  });

  it('through the real file interface, an absent path is reported the same way (node fs, not the fake)', async () => {
    const fake = await sysfs({ absent: true });
    const log = await measureSelfIntoRtmr3({
      ...options(fake),
      fs: undefined,
      ccelTablePath: join(work, 'no-such-CCEL'),
      ccelDataPath: join(work, 'no-such-data'),
    });
    expect(log).toEqual({
      ccel_table: null,
      ccel_data: null,
      runtime_events: [],
      self_measurement: {
        extended: false,
        reason: `the kernel exposes no writable RTMR3 (${fake.rtmrPath} is absent; the TDX guest driver offers it from Linux 6.16): the quote proves the firmware and boot chain, not which proxy runs`,
      },
    });
    expect(existsSync(fake.rtmrPath)).toBe(false);
  });

  it('an unreadable log of earlier events is a stated refusal, not a silent pass', async () => {
    const fake = await sysfs();
    await mkdir(join(fake.root, 'run/sigil'), { recursive: true });
    await writeFile(join(fake.root, 'run/sigil/rtmr-events.json'), 'not json');
    const log = await measureSelfIntoRtmr3(options(fake));
    expect(log.self_measurement).toEqual({
      extended: false,
      reason: `the log of earlier RTMR3 events (${join(fake.root, 'run/sigil/rtmr-events.json')}) is not a JSON list of events, so RTMR3 could not be explained after one more event: the quote proves the firmware and boot chain, not which proxy runs`,
    });
    expect(fake.writes).toEqual([]);
  });
});

describe('a TDX document with the self measurement, checked by the verifier', () => {
  let intel: IntelTestChain;
  const jwks = testJwks();
  const MRTD = Buffer.alloc(48, 0x4d);
  const failing = (checks: Check[]) => checks.filter((c) => !c.ok).map((c) => c.name);

  beforeAll(async () => {
    intel = await createIntelTestChain();
  });

  async function startDocument() {
    const fake = await sysfs();
    const eventLog = await measureSelfIntoRtmr3(options(fake));
    // The "TDX module" quotes the registers as they are now: RTMR0/1 from the CCEL's boot, RTMR3 from the fake sysfs.
    const configfs = await FakeConfigfs.create({
      provider: 'tdx_guest',
      makeEvidence: (inblob) => ({
        outblob: buildTdxQuote({ reportData: inblob, mrTd: MRTD, rtmrs: [CCEL_RTMR0, CCEL_RTMR1, ZERO, readFileSync(fake.rtmrPath)] }, intel),
      }),
    });
    cleanups.push(() => configfs.dispose());
    const provider = await createConfigfsTsmProvider({ tsmPath: configfs.reportDir, fs: configfs });
    const { document } = await makeAttestationDocument(
      {
        provider,
        collectGpuEvidence: NO_GPUS,
        eventLog,
        manifestSha384: MANIFEST_SHA384,
        keyOrigin: { receipt: { origin: 'generated' }, tls: null, hpke: null },
      },
      { jwks, policyHash: POLICY_HASH, tlsSpkiSha256: null, hpkeKeyConfig: null },
      START_NONCE,
    );
    return document;
  }

  const verify = (doc: unknown) => verifyAttestationDocument(doc, { jwks, nonce: START_NONCE, expectedMeasurement: MRTD.toString('hex'), roots: intel.roots });

  it('replays the CCEL and Sigil event to exactly the quote RTMR0-3', async () => {
    const document = await startDocument();
    expect(document.event_log!.self_measurement).toEqual({ extended: true, reason: null });
    const checks = await verify(document);
    expect(failing(checks)).toEqual([]);
    expect(checks.filter((c) => c.name.startsWith('eventlog.')).map((c) => [c.name, c.ok])).toEqual([
      ['eventlog.ccel_table', true],
      ['eventlog.parse', true],
      ['eventlog.runtime_events', true],
      ['eventlog.rtmr0', true],
      ['eventlog.rtmr1', true],
      ['eventlog.rtmr2', true],
      ['eventlog.rtmr3', true],
      ['eventlog.event_data', true],
    ]);
  });

  it('a published payload changed after the fact fails: its digest no longer matches', async () => {
    const document = await startDocument();
    const event = document.event_log!.runtime_events[0]!;
    event.payload = event.payload.replace(POLICY_HASH, 'sha256:' + '44'.repeat(32));
    expect(failing(await verify(document))).toEqual(['eventlog.runtime_events', 'eventlog.event_data', 'attestation.events']);
  });

  it('a payload swapped together with its digest fails RTMR3: the quote holds what was really extended', async () => {
    const document = await startDocument();
    const forged = runtimeEvent(document.event_log!.runtime_events[0]!.payload.replace(POLICY_HASH, 'sha256:' + '44'.repeat(32)));
    document.event_log!.runtime_events[0] = forged;
    // The binding, signed into REPORT_DATA, also names the real event's digest: on SEV-SNP that is what catches it.
    expect(failing(await verify(document))).toEqual(['eventlog.rtmr3', 'attestation.events']);
  });
});
