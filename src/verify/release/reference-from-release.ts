import { ReferenceValuesError, type ReferenceValues } from '../reference/reference-values.ts';
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

/** The keys a release manifest gives (referenceValuesFromRelease): a reference file used with a release may not pin them. */
export const RELEASE_KEYS = ['sigil.manifest_sha384', 'snp.measurement', 'tdx.mrtd', 'tdx.rtmr0', 'tdx.rtmr1', 'tdx.rtmr2'] as const;

/**
 * The auditor's own reference values (machine allow-lists, TCB floors, policy bits: what a release cannot know)
 * with a verified release's values added; `release` undefined (not given, or not verified) leaves `own` as is.
 * A key the release states is refused in `own`, naming it, so the release's value is never silently replaced.
 */
export function withReleaseValues(own: ReferenceValues, release: ReferenceValues | undefined): ReferenceValues {
  for (const key of RELEASE_KEYS) {
    const [section, name] = key.split('.') as [keyof ReferenceValues, string];
    if ((own[section] as Record<string, unknown> | undefined)?.[name] !== undefined) {
      throw new ReferenceValuesError(
        key,
        'is stated by the release manifest: next to a release, reference values may only add what a release does not state (machine allow-lists, TCB floors, policy)',
      );
    }
  }
  if (release === undefined) return own;
  return {
    ...own,
    ...(release.sigil === undefined ? {} : { sigil: { ...own.sigil, ...release.sigil } }),
    ...(release.snp === undefined ? {} : { snp: { ...own.snp, ...release.snp } }),
    ...(release.tdx === undefined ? {} : { tdx: { ...own.tdx, ...release.tdx } }),
  };
}
