import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fail, notPinned, pass, waive, type Check } from '../../src/verify/check.ts';
import { CHECKS } from '../../src/verify/check-registry.ts';
import { EAR_CLAIMS, EAR_PROFILE, earClaimOf, toEar } from '../../src/verify/ear.ts';

/** The EAR draft's own JSON example (test/vectors/ear/ear-json-1.json): the claim names and value kinds Sigil's export must use. */
const example = JSON.parse(readFileSync(new URL('../vectors/ear/ear-json-1.json', import.meta.url), 'utf8')) as {
  eat_profile: string;
  ear_verifier_id: Record<string, string>;
  submods: Record<string, { ear_status: string; ear_trustworthiness_vector: Record<string, number>; ear_appraisal_policy_ids: string[] }>;
};
const exampleSubmod = Object.values(example.submods)[0]!;
const verifier = { developer: 'https://sigil.example', build: 'sigil 0.0.0-test' };
const GENUINE: Check[] = [
  pass('snp.report_signature', 'signed'),
  pass('snp.debug', 'clear'),
  pass('attestation.report_data', 'ours'),
  pass('attestation.measurement', 'expected'),
  pass('reference.measurement', 'pinned'),
  pass('attestation.policy', 'bound'),
];

describe('toEar', () => {
  it("uses the draft's profile, claim names and value kinds", () => {
    const ear = toEar(GENUINE, { verifier, submod: 'https://inference.example', iat: 1666529184 });
    expect(ear.eat_profile).toBe(example.eat_profile);
    expect(Object.keys(ear).sort()).toEqual(
      Object.keys(example)
        .filter((k) => k !== 'ear_raw_evidence')
        .sort(),
    );
    expect(Object.keys(ear.ear_verifier_id).sort()).toEqual(Object.keys(example.ear_verifier_id).sort());
    const submod = ear.submods['https://inference.example']!;
    expect(Object.keys(submod).sort()).toEqual(Object.keys(exampleSubmod).sort());
    expect(submod).toEqual({
      ear_status: 'affirming',
      ear_trustworthiness_vector: { 'instance-identity': 2, executables: 2, configuration: 2, hardware: 2 },
      ear_appraisal_policy_ids: ['sigil:docs/auditing.md#what-a-verdict-means'],
    });
    // The draft's example uses the same claim names with the same tier values (2 affirming, 96 contraindicated).
    expect(
      Object.keys(exampleSubmod.ear_trustworthiness_vector).every((k) => ['instance-identity', 'executables', 'hardware', 'configuration'].includes(k)),
    ).toBe(true);
    expect(EAR_PROFILE).toBe('tag:ietf.org,2026:rats/ear#04');
  });

  it("reproduces the draft example's appraisal: genuine hardware and identity, executables contraindicated", () => {
    const checks = GENUINE.map((c) => (c.name === 'reference.measurement' ? fail(c.name, 'not the audited code') : c)).filter(
      (c) => c.name !== 'snp.debug' && c.name !== 'attestation.policy',
    );
    const submod = toEar(checks, { verifier, submod: 'PSA', iat: 1666529184 }).submods.PSA!;
    expect(submod.ear_status).toBe(exampleSubmod.ear_status);
    expect(submod.ear_trustworthiness_vector).toEqual(exampleSubmod.ear_trustworthiness_vector);
  });

  it('never affirms what was waived or not pinned: waivers warn (32), unpinned values claim nothing (0)', () => {
    const waived = toEar([...GENUINE, waive(fail('attestation.tls_key', 'plain HTTP'), 'development')], { verifier, submod: 's', iat: 1 }).submods.s!;
    expect(waived.ear_status).toBe('warning');
    expect(waived.ear_trustworthiness_vector['instance-identity']).toBe(32);
    const unpinned = toEar([...GENUINE, notPinned('reference.rtmr3', 'nobody pinned it')], { verifier, submod: 's', iat: 1 }).submods.s!;
    expect(unpinned.ear_status).toBe('contraindicated');
    expect(unpinned.ear_trustworthiness_vector.executables).toBe(0);
  });

  it('contraindicates the claim a failed check feeds: other code, a loaded key or a forged receipt never leave the vector affirming', () => {
    const vectorWith = (check: Check) => toEar([...GENUINE, check], { verifier, submod: 's', iat: 1 }).submods.s!;
    const cases: Array<[string, string]> = [
      ['attestation.manifest', 'executables'],
      ['attestation.events', 'executables'],
      ['release.expiry', 'executables'],
      ['attestation.key_origin', 'instance-identity'],
      ['attestation.nonce', 'instance-identity'],
      ['receipt.signature', 'instance-identity'],
      ['model_receipt.measurement', 'instance-identity'],
      ['live.request', 'instance-identity'],
      ['policy.model', 'configuration'],
    ];
    for (const [name, claim] of cases) {
      const failed = vectorWith(fail(name, 'does not match'));
      expect({ name, status: failed.ear_status, claim: failed.ear_trustworthiness_vector[claim] }).toEqual({ name, status: 'contraindicated', claim: 96 });
      const waived = vectorWith(waive(fail(name, 'does not match'), 'development'));
      expect({ name, status: waived.ear_status, claim: waived.ear_trustworthiness_vector[claim] }).toEqual({ name, status: 'warning', claim: 32 });
    }
  });

  it('gives every check in the registry a claim, and a failure of any of them leaves no vector all affirming', () => {
    // A family such as `gpu.*` also names its devices' checks: `gpu[0].chain`, `gpu.rim[0].signature`.
    const names = [...CHECKS.map((c) => (c.name.endsWith('.*') ? `${c.name.slice(0, -2)}.example` : c.name)), 'gpu[0].chain', 'gpu.rim[0].signature'];
    for (const name of names) {
      expect({ name, claim: earClaimOf(name) }).not.toEqual({ name, claim: undefined });
      const vector = toEar([...GENUINE, fail(name, 'does not match')], { verifier, submod: 's', iat: 1 }).submods.s!.ear_trustworthiness_vector;
      expect({ name, contraindicated: Object.values(vector).includes(96) }).toEqual({ name, contraindicated: true });
    }
  });

  it('feeds every claim from a check the table does not name, so a new check can lower the vector but never go unseen', () => {
    const vector = toEar([...GENUINE, fail('future.check', 'does not match')], { verifier, submod: 's', iat: 1 }).submods.s!.ear_trustworthiness_vector;
    expect(vector).toEqual({ 'instance-identity': 96, executables: 96, configuration: 96, hardware: 96 });
  });

  it('documents the mapping in docs/auditing.md exactly as the code applies it', () => {
    const doc = readFileSync(new URL('../../docs/auditing.md', import.meta.url), 'utf8');
    const section = doc.slice(doc.indexOf('### Exporting the verdict as an EAR'), doc.indexOf('### Which check stops which attack'));
    const rows = section
      .split('\n')
      .filter((line) => /^\| `[a-z-]+` \|/.test(line))
      .map((line) => {
        const [claim, checks] = line
          .split('|')
          .slice(1, 3)
          .map((cell) => cell.trim());
        return [claim!.replaceAll('`', ''), [...checks!.matchAll(/`([^`]+)`/g)].map((m) => m[1])];
      });
    expect(rows).toEqual(EAR_CLAIMS.map(([claim, patterns]) => [claim, [...patterns]]));
  });
});
