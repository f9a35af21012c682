import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyedSnpRelease, releaseFlags } from '../release/release-fixtures.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { runSigilVerify } from '../support/cli.ts';

const DAY = 86_400_000;
const UNCOMPARED =
  'the reference values pin launch measurements for SEV-SNP (MEASUREMENT: 1 value), but this service runs in no hardware enclave and reports no launch measurement: none of them was compared with what runs';
const dir = mkdtempSync(join(tmpdir(), 'sigil-verify-release-dev-'));
const save = (name: string, data: string) => {
  writeFileSync(join(dir, name), data);
  return join(dir, name);
};

const sigilVerify = (argv: string[]) => runSigilVerify(argv);

describe('sigil verify --release against a development service (no hardware TEE)', () => {
  let engine: TestEngine;
  let sigil: TestSigil;

  beforeAll(async () => {
    engine = await startTestEngine({ modelNames: ['m'] });
    sigil = await startTestSigil({
      upstreams: { main: { url: engine.baseUrl } },
      models: [{ id: 'm' }],
      config: { attestation: { provider: 'none' }, log: { level: 'silent' } },
    });
  });
  afterAll(async () => {
    await sigil.close();
    await engine.close();
  });

  it("says the release's launch measurements were not compared, and why, and does not verify", async () => {
    const release = releaseFlags(keyedSnpRelease('5d'.repeat(48), new Date(Date.now() + DAY)), 'dev', save);
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--model', 'm', ...release]);
    expect(r.stdout).toContain(`FAIL reference.values — ${UNCOMPARED}\n`);
    // The release itself was verified, and what a development service does report (its manifest) was compared with it.
    expect(r.stdout).toMatch(/^PASS release\.signature — /m);
    expect(r.stdout).toMatch(/^FAIL attestation\.manifest — manifest [0-9a-f]{96} is reported, not hardware-backed/m);
    expect(r.stdout).toMatch(/^NOT VERIFIED: /m);
    expect(r.code).not.toBe(0);
  });

  it('with --allow-no-tee, waives the comparison it could not make and still says so in the verdict', async () => {
    const release = releaseFlags(keyedSnpRelease('5d'.repeat(48), new Date(Date.now() + DAY)), 'dev-waived', save);
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--model', 'm', '--allow-no-tee', ...release]);
    expect(r.stdout).toMatch(new RegExp(`^WAIVED reference\\.values — ${UNCOMPARED.replace(/[()]/g, '\\$&')} \\(waived: `, 'm'));
    expect(r.stdout).toMatch(/; the code was not compared with reference values\n$/);
  });
});
