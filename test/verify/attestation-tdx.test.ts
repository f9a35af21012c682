import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { readCcelEventLog } from '../../src/verify/evidence/event-log/ccel.ts';
import { replayRtmrs } from '../../src/verify/evidence/event-log/replay.ts';
import { parseReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { verifyAttestationDocument } from '../../src/verify/attestation.ts';
import type { Check } from '../../src/verify/check.ts';
import {
  buildTdxQuote,
  createIntelTestChain,
  tdxDocument,
  testJwks,
  type IntelTestChain,
  expectedReportData,
  TEST_START_EVENT,
} from '../support/evidence-fixtures.ts';

const failing = (checks: Check[]) => checks.filter((c) => !c.ok).map((c) => c.name);

const ALL_TDX_CHECKS = [
  'tdx.quote',
  'tdx.quote_signature',
  'tdx.qe_report_signature',
  'tdx.qe_binding',
  'tdx.qe',
  'tdx.pck_chain',
  'tdx.root',
  'tdx.instance',
  'tdx.debug',
  'tdx.td_attributes',
  'tdx.xfam',
  'tdx.mr_config_id',
  'tdx.mr_owner',
  'tdx.mr_owner_config',
  'tdx.mrseam',
  'tdx.tee_tcb_svn',
  'tdx.tcb_status',
  'attestation.report_data',
  'attestation.jwks',
  'attestation.measurement',
  'reference.values',
  'reference.mrtd',
  'reference.rtmr0',
  'reference.rtmr1',
  'reference.rtmr2',
  'reference.rtmr3',
  'eventlog.runtime_events',
  'eventlog.rtmr0',
  'eventlog.rtmr1',
  'eventlog.rtmr2',
  'eventlog.rtmr3',
  'eventlog.event_data',
  'attestation.key_origin',
  'attestation.events',
  'attestation.manifest',
];

describe('TDX attestation document', () => {
  let chain: IntelTestChain;
  let foreign: IntelTestChain;
  const jwks = testJwks();
  const nonce = new Uint8Array(32).fill(0x11);
  const mrTd = Buffer.alloc(48, 0x7d);
  const mrTdHex = mrTd.toString('hex');
  const reportData = expectedReportData(nonce, jwks);

  beforeAll(async () => {
    chain = await createIntelTestChain();
    foreign = await createIntelTestChain();
  });

  const document = (quote: Uint8Array) => tdxDocument(quote, nonce, jwks, mrTdHex, reportData);

  it('valid evidence passes every check, in order', async () => {
    const checks = await verifyAttestationDocument(document(buildTdxQuote({ reportData, mrTd }, chain)), {
      jwks,
      nonce,
      expectedMeasurement: mrTdHex,
      roots: chain.roots,
    });
    expect(checks.map((c) => c.name)).toEqual(ALL_TDX_CHECKS);
    expect(failing(checks)).toEqual([]);
  });

  it('an MRTD flipped inside the signed body breaks the quote signature and the measurement match', async () => {
    const quote = buildTdxQuote({ reportData, mrTd }, chain);
    quote[48 + 136] = quote[48 + 136]! ^ 0x01;
    const checks = await verifyAttestationDocument(document(quote), { jwks, nonce, expectedMeasurement: mrTdHex, roots: chain.roots });
    expect(failing(checks)).toEqual(['tdx.quote_signature', 'attestation.measurement']);
  });

  it('a signed quote of another MRTD fails only the measurement check', async () => {
    const quote = buildTdxQuote({ reportData, mrTd: Buffer.alloc(48, 0x01) }, chain);
    const checks = await verifyAttestationDocument(document(quote), { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['attestation.measurement']);
  });

  it('a quote whose REPORTDATA binds other data fails the report data check', async () => {
    const quote = buildTdxQuote({ reportData: new Uint8Array(64).fill(9), mrTd }, chain);
    const checks = await verifyAttestationDocument(document(quote), { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['attestation.report_data']);
  });

  it('a PCK chain from a foreign root fails the root check', async () => {
    const quote = buildTdxQuote({ reportData, mrTd }, foreign);
    const checks = await verifyAttestationDocument(document(quote), { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['tdx.root']);
  });

  it('the real Intel root is the default, and a test chain does not chain to it', async () => {
    const checks = await verifyAttestationDocument(document(buildTdxQuote({ reportData, mrTd }, chain)), { jwks, nonce });
    expect(failing(checks)).toEqual(['tdx.root']);
  });

  it('a QE report that does not bind the attestation key fails the binding check', async () => {
    const quote = buildTdxQuote({ reportData, mrTd, unboundQeReport: true }, chain);
    const checks = await verifyAttestationDocument(document(quote), { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['tdx.qe_binding']);
  });

  it('a QE report signed by another PCK key fails the QE report signature check', async () => {
    const quote = buildTdxQuote({ reportData, mrTd }, { ...chain, pckKey: foreign.pckKey });
    const checks = await verifyAttestationDocument(document(quote), { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['tdx.qe_report_signature']);
  });

  it('a PCK certificate that its CA did not sign fails the chain check', async () => {
    const quote = buildTdxQuote({ reportData, mrTd }, { ...chain, pck: foreign.pck, pckKey: foreign.pckKey });
    const checks = await verifyAttestationDocument(document(quote), { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['tdx.pck_chain']);
  });

  it('a TD in debug mode fails the TD attributes check', async () => {
    const quote = buildTdxQuote({ reportData, mrTd, tdAttributes: Buffer.from('0100000000000000', 'hex') }, chain);
    const checks = await verifyAttestationDocument(document(quote), { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['tdx.debug']);
  });

  it('a truncated quote fails the quote check with its code', async () => {
    const quote = buildTdxQuote({ reportData, mrTd }, chain);
    const checks = await verifyAttestationDocument(document(quote.subarray(0, 700)), { jwks, nonce, roots: chain.roots });
    expect(checks).toHaveLength(1);
    expect(checks[0]).toMatchObject({ name: 'tdx.quote', ok: false });
    expect(checks[0]!.detail).toMatch(/^ERR_TDX_QUOTE_TRUNCATED: /);
  });
});

describe('a TDX document with an event log and reference values', () => {
  let chain: IntelTestChain;
  const jwks = testJwks();
  const nonce = new Uint8Array(32).fill(0x22);
  const mrTd = Buffer.alloc(48, 0x7d);
  const reportData = expectedReportData(nonce, jwks);
  const ccel = readFileSync(new URL('../vectors/tdx/dstack-ccel.bin', import.meta.url));
  // Sigil's start event, as the binding of a test document names it.
  const { payload, digest } = TEST_START_EVENT;
  const boot = replayRtmrs(readCcelEventLog(ccel));
  const rtmrs = [boot[0], boot[1], boot[2], createHash('sha384').update(Buffer.alloc(48)).update(Buffer.from(digest, 'hex')).digest()];
  const withLog = (quote: Uint8Array, runtimePayload = payload) => ({
    ...tdxDocument(quote, nonce, jwks, mrTd.toString('hex'), reportData),
    event_log: {
      ccel_table: null,
      ccel_data: ccel.toString('base64'),
      runtime_events: [{ imr: 3, event: 'sigil', digest, payload: runtimePayload }],
      self_measurement: { extended: true, reason: null },
    },
  });

  beforeAll(async () => {
    chain = await createIntelTestChain();
  });

  it("replays the CCEL and Sigil's event into the quote's RTMRs and compares the pinned ones", async () => {
    const quote = buildTdxQuote({ reportData, mrTd, rtmrs }, chain);
    const reference = parseReferenceValues(`tdx:\n  mrtd: ${mrTd.toString('hex')}\n  rtmr3: ${Buffer.from(rtmrs[3]!).toString('hex')}\n`);
    let listed = 0;
    const checks = await verifyAttestationDocument(withLog(quote), {
      jwks,
      nonce,
      roots: chain.roots,
      reference,
      onEvents: (events) => (listed = events.length),
    });
    expect(failing(checks)).toEqual([]);
    expect(
      checks
        .filter((c) => c.name.startsWith('eventlog.') || c.name.startsWith('reference.'))
        .map((c) => [c.name, c.pinned === false ? 'not pinned' : 'checked']),
    ).toEqual([
      ['reference.values', 'checked'],
      ['reference.mrtd', 'checked'],
      ['reference.rtmr0', 'not pinned'],
      ['reference.rtmr1', 'not pinned'],
      ['reference.rtmr2', 'not pinned'],
      ['reference.rtmr3', 'checked'],
      ['eventlog.parse', 'checked'],
      ['eventlog.runtime_events', 'checked'],
      ['eventlog.rtmr0', 'checked'],
      ['eventlog.rtmr1', 'checked'],
      ['eventlog.rtmr2', 'checked'],
      ['eventlog.rtmr3', 'checked'],
      ['eventlog.event_data', 'checked'],
    ]);
    expect(listed).toBe(19);
  });

  it('fails when the published runtime payload is not what RTMR3 measured', async () => {
    const quote = buildTdxQuote({ reportData, mrTd, rtmrs }, chain);
    const checks = await verifyAttestationDocument(withLog(quote, '{"sigil":"0.1.1"}'), { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['eventlog.runtime_events', 'eventlog.event_data', 'attestation.events']);
  });

  it('fails naming RTMR1 when the quote was made after a boot the log does not describe', async () => {
    const quote = buildTdxQuote({ reportData, mrTd, rtmrs: [rtmrs[0]!, Buffer.alloc(48, 1), rtmrs[2]!, rtmrs[3]!] }, chain);
    const checks = await verifyAttestationDocument(withLog(quote), { jwks, nonce, roots: chain.roots });
    expect(failing(checks)).toEqual(['eventlog.rtmr1']);
  });
});
