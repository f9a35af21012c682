/**
 * RIM structure before trust: NVIDIA's real RIMs pass; tampered copies, signed again by a test RIM chain so that the
 * signature holds, fail `rim.schema` naming what breaks the SWID schema, and give no RIM to compare with.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { verifyRim } from '../../../src/verify/gpu/rim.ts';
import { NVIDIA_RIM_ROOT } from '../../../src/verify/gpu/roots/nvidia-rim-root.ts';
import { createRimTestChain, rimText, signRim, VECTOR_TIME, type RimTestChain } from '../../support/gpu-fixtures.ts';

let chain: RimTestChain;
beforeAll(async () => {
  chain = await createRimTestChain();
});

const unsigned = (name: Parameters<typeof rimText>[0]) => rimText(name).replace(/<ds:Signature[\s\S]*<\/ds:Signature>/, '');

describe('RIM schema validation', () => {
  it("passes NVIDIA's real driver, VBIOS and production VBIOS RIMs", () => {
    for (const name of ['driver-rim-test.swidtag', 'vbios-rim-test.swidtag', 'vbios-rim-prod-96005E0001.swidtag'] as const) {
      const { checks, rim } = verifyRim(rimText(name), { name: 'rim', roots: [NVIDIA_RIM_ROOT], at: VECTOR_TIME });
      expect(checks.find((c) => c.name === 'rim.schema')!.ok).toBe(true);
      expect(rim).toBeDefined();
    }
  });

  it('passes the same RIM re-signed by the test chain, so the failures below are the tampering alone', () => {
    const { checks, rim } = verifyRim(signRim(unsigned('driver-rim-test.swidtag'), chain), { name: 'rim', roots: [chain.rootPem], at: VECTOR_TIME });
    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['rim.signature', true],
      ['rim.schema', true],
      ['rim.chain', true],
      ['rim.revocation', true],
    ]);
    expect(rim?.version).toBe('545.00');
  });

  const tamperings: Array<[string, (xml: string) => string, string]> = [
    ['a second Payload', (x) => x.replace(/(<ns0:Payload[\s\S]*<\/ns0:Payload>)/, '$1$1'), 'the RIM holds 2 Payload elements, not 1'],
    ['no Payload', (x) => x.replace(/<ns0:Payload[\s\S]*<\/ns0:Payload>/, ''), 'the RIM holds 0 Payload elements, not 1'],
    ['no tag creator', (x) => x.replace('role="softwareCreator tagCreator"', 'role="softwareCreator"'), 'no Entity has the role tagCreator'],
    ['no tagId', (x) => x.replace(/ tagId="[^"]*"/, ''), 'SoftwareIdentity has no tagId (required)'],
    ['an index that is not an integer', (x) => x.replace('index="1" ', 'index="one" '), 'Measurement one: index="one" is not a non-negative integer'],
    ['a boolean the schema does not know', (x) => x.replace('corpus="false"', 'corpus="no"'), 'SoftwareIdentity corpus="no" is not an xs:boolean'],
    [
      'a measurement outside the Payload',
      (x) =>
        x
          .replace(/(<ns0:Resource type="Measurement" index="0"[^>]*\/>)/, '')
          .replace('<ns0:Meta ', '<ns0:Resource type="Measurement" index="0" active="False" alternatives="1" size="48" name="Measurement_0"/><ns0:Meta '),
      'SoftwareIdentity holds a Resource element, which the SWID schema does not allow there',
    ],
  ];

  for (const [what, tamper, words] of tamperings) {
    it(`fails a RIM with ${what}, and gives no RIM to compare with`, () => {
      const { checks, rim } = verifyRim(signRim(tamper(unsigned('driver-rim-test.swidtag')), chain), { name: 'rim', roots: [chain.rootPem], at: VECTOR_TIME });
      const schema = checks.find((c) => c.name === 'rim.schema')!;
      expect(checks.find((c) => c.name === 'rim.signature')!.ok).toBe(true);
      expect(schema.ok).toBe(false);
      expect(schema.detail).toContain(words);
      expect(rim).toBeUndefined();
    });
  }
});
