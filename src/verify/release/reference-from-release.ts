import type { ReferenceValues } from '../reference/reference-values.ts';
import type { ReleasePredicate } from './manifest.ts';

function addUnique(list: string[] | undefined, value: string | undefined): string[] | undefined {
  if (value === undefined) return list;
  if (list === undefined) return [value];
  return list.includes(value) ? list : [...list, value];
}

/**
 * The reference values a verified release manifest stands for: each VM shape's value is one accepted value of
 * its register, so evidence from any listed shape passes (docs/release.md says why registers are not paired),
 * and Sigil's self-measurement is the manifest digest the last runtime event must name (`attestation.manifest`).
 */
export function referenceValuesFromRelease(predicate: ReleasePredicate): ReferenceValues {
  const out: ReferenceValues = { sigil: { manifest_sha384: [predicate.sigil_self_measurement] } };
  for (const target of predicate.targets) {
    const m = target.measurements;
    if (target.platform === 'sev-snp') {
      const snp = (out.snp ??= {});
      const measurement = addUnique(snp.measurement, m.measurement);
      if (measurement !== undefined) snp.measurement = measurement;
    } else {
      const tdx = (out.tdx ??= {});
      for (const key of ['mrtd', 'rtmr0', 'rtmr1', 'rtmr2'] as const) {
        const values = addUnique(tdx[key], m[key]);
        if (values !== undefined) tdx[key] = values;
      }
    }
  }
  return out;
}
