import { describe, expect, it } from 'vitest';
import { checkMark } from '../../src/verify/check.ts';
import { ReferenceValuesError, type ReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { verifyReleaseReference } from '../../src/verify/release/release-reference.ts';
import { keyedSnpRelease } from './release-fixtures.ts';

/** docs/release.md, "Verifying": the one place a release becomes reference values, for the CLI, verify-evidence and the attested client. */
const NOW = new Date('2026-11-25T12:00:00Z');
const DAY = 86_400_000;
const MEASUREMENT = 'a5'.repeat(48);
const OWN: ReferenceValues = { snp: { chip_id: ['c1'.repeat(64)], vmpl: [0] } };
const keyed = (expires: Date) => {
  const r = keyedSnpRelease(MEASUREMENT, expires);
  return { bundle: new TextEncoder().encode(r.bundle), trust: { kind: 'key' as const, publicKey: r.publicKeyPem } };
};

describe('verifyReleaseReference', () => {
  it("gives the release's checks and its values with the auditor's own added", () => {
    const { bundle, trust } = keyed(new Date(NOW.getTime() + DAY));
    const result = verifyReleaseReference(bundle, trust, OWN, NOW);
    expect(result.checks.map((c) => `${checkMark(c)} ${c.name}`)).toEqual([
      'PASS release.bundle',
      'PASS release.signer',
      'WAIVED release.tlog',
      'PASS release.signature',
      'PASS release.identity',
      'PASS release.statement',
      'PASS release.expiry',
      'PASS release.validity',
    ]);
    expect(result.values).toEqual({
      sigil: { manifest_sha384: ['5e'.repeat(48)] },
      snp: { chip_id: ['c1'.repeat(64)], vmpl: [0], measurement: [MEASUREMENT] },
    });
    expect(verifyReleaseReference(bundle, trust, undefined, NOW).values).toEqual({
      sigil: { manifest_sha384: ['5e'.repeat(48)] },
      snp: { measurement: [MEASUREMENT] },
    });
  });

  it('keeps only the auditor’s own values when the release fails, and its failed check says why', () => {
    const { bundle, trust } = keyed(new Date(NOW.getTime() - DAY));
    const result = verifyReleaseReference(bundle, trust, OWN, NOW);
    expect(result.checks.filter((c) => checkMark(c) === 'FAIL').map((c) => c.name)).toEqual(['release.expiry']);
    expect(result.values).toEqual(OWN);
    expect(verifyReleaseReference(bundle, trust, undefined, NOW).values).toBeUndefined();
  });

  it('refuses own values that pin what the release states, naming the key', () => {
    const { bundle, trust } = keyed(new Date(NOW.getTime() + DAY));
    const error = (() => {
      try {
        verifyReleaseReference(bundle, trust, { snp: { measurement: ['ab'.repeat(48)] } }, NOW);
      } catch (err) {
        return err;
      }
    })();
    expect(error).toBeInstanceOf(ReferenceValuesError);
    expect((error as ReferenceValuesError).message).toBe(
      'snp.measurement: is stated by the release manifest: next to a release, reference values may only add what a release does not state (machine allow-lists, TCB floors, policy)',
    );
  });
});
