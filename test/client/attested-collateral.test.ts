/**
 * The attested client's `collateral` option against a real Sigil on a stand-in SEV-SNP guest (configfs-tsm whose
 * reports the test AMD chain signs) whose certificate table, like many real hosts', carries no CRL: AMD's CRL comes
 * from the collateral bundle, as with `sigil verify --collateral`.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConfigfsTsmProvider } from '../../src/attestation/configfs-tsm.ts';
import { AttestationError, createAttestedFetch } from '../../src/client/index.ts';
import { checkMark, type Check } from '../../src/verify/check.ts';
import { amdCertTable, amdTestCrl, buildSnpReport, createAmdTestChain, type AmdTestChain } from '../support/evidence-fixtures.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { FakeConfigfs } from '../attestation/fake-configfs.ts';

const MEASUREMENT = Buffer.alloc(48, 0x6d);
let engine: TestEngine;
let amd: AmdTestChain;
let configfs: FakeConfigfs;
let sigil: TestSigil;
const work = mkdtempSync(join(tmpdir(), 'sigil-client-collateral-'));

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  amd = await createAmdTestChain();
  configfs = await FakeConfigfs.create({
    provider: 'sev_guest',
    // VCEK and ASK, no CRL entry: the host's certificate table leaves revocation to the verifier.
    makeEvidence: (inblob) => ({
      outblob: buildSnpReport({ reportData: inblob, measurement: MEASUREMENT }, amd.vcekKey),
      auxblob: amdCertTable({ ...amd, crl: undefined }),
    }),
  });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { tls: { mode: 'self-signed', hostnames: ['localhost'] } },
    start: { attestationProvider: await createConfigfsTsmProvider({ tsmPath: configfs.reportDir, fs: configfs }) },
  });
});

afterAll(async () => {
  await sigil.close(0);
  await configfs.dispose();
  await engine.close();
  rmSync(work, { recursive: true, force: true });
});

const baseURL = () => sigil.url.replace('127.0.0.1', 'localhost');
const crlCheck = (checks: readonly Check[]) => checks.find((c) => c.name === 'snp.crl')!;

describe('createAttestedFetch with a collateral bundle, on a host whose certificate table has no CRL', () => {
  it('refuses the service without a bundle: snp.crl fails closed, and nothing is sent', async () => {
    const before = engine.requests.length;
    const refused = await createAttestedFetch({ baseURL: baseURL(), roots: amd.roots, allowUnpinnedCode: true }).then(
      () => undefined,
      (e: unknown) => e as AttestationError,
    );
    expect(refused).toBeInstanceOf(AttestationError);
    const crl = crlCheck(refused!.checks);
    expect(checkMark(crl)).toBe('FAIL');
    expect(crl.detail).toBe(
      "not checked: no AMD CRL was given (a collateral bundle's amd-crl.der, from `sigil collateral fetch`, or the certificate table's CRL entry), so a revoked AMD signing key would pass",
    );
    expect(refused!.checks.filter((c) => !c.ok && c.waived === undefined).map((c) => c.name)).toEqual(['snp.crl']);
    expect(engine.requests.length).toBe(before);
  });

  it("attests with the bundle directory holding AMD's CRL (amd-crl.der), and the openai client's request carries a verified receipt", async () => {
    const dir = join(work, 'bundle');
    mkdirSync(dir);
    writeFileSync(join(dir, 'amd-crl.der'), new Uint8Array(amd.crl.rawData));
    const attested = await createAttestedFetch({ baseURL: baseURL(), roots: amd.roots, allowUnpinnedCode: true, collateral: dir });
    try {
      const crl = crlCheck(attested.attestation.checks);
      expect(checkMark(crl)).toBe('PASS');
      expect(crl.detail).toMatch(
        /^SEV-Test \(serial 02\) is not among the 0 certificate\(s\) ARK-Test revoked \(CRL from the collateral bundle \(amd-crl\.der\), signed by ARK-Test, /,
      );
      expect(attested.attestation.verdict.outcome).toBe('verified-with-waivers');
      const client = new OpenAI({ baseURL: `${baseURL()}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true });
    } finally {
      await attested.close();
    }
  });

  it("refuses the service when the bundle's CRL (given already read) revokes the ASK that certified the VCEK", async () => {
    const revoking = await amdTestCrl(amd, [amd.ask.serialNumber]);
    const refused = await createAttestedFetch({
      baseURL: baseURL(),
      roots: amd.roots,
      allowUnpinnedCode: true,
      collateral: { intel: {}, amd: { crl: new Uint8Array(revoking.rawData) } },
    }).then(
      () => undefined,
      (e: unknown) => e as AttestationError,
    );
    const crl = crlCheck(refused!.checks);
    expect(checkMark(crl)).toBe('FAIL');
    expect(crl.detail).toBe('ARK-Test revoked SEV-Test (serial 02) on 2024-06-01T00:00:00.000Z: keys it certified cannot be trusted');
  });
});
