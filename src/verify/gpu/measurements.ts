import type { Rim } from './rim.ts';
import type { SpdmMeasurementBlock } from './spdm-measurements.ts';

export interface MeasurementMismatch {
  /** NVIDIA's numbering (the SPDM block index - 1), as the RIMs use. */
  index: number;
  rim: string;
  /** Lowercase hex of what the GPU reported, or null when it reported nothing at that index. */
  reported: string | null;
  expected: string[];
}

export interface MeasurementComparison {
  /** Indexes an active RIM measurement pins, in order. */
  compared: number[];
  mismatches: MeasurementMismatch[];
  /** Indexes that two RIMs both pin: the RIMs contradict each other about who measures what. */
  conflicts: number[];
}

/**
 * Every active measurement of every RIM against the GPU's report, as NVIDIA's verifier does: the value at that index
 * must equal one of the RIM's alternatives. Inactive ones are skipped (the RIM says the GPU does not measure them).
 */
export function compareWithRims(blocks: SpdmMeasurementBlock[], rims: Rim[]): MeasurementComparison {
  const reported = new Map(blocks.map((b) => [b.index - 1, Buffer.from(b.value).toString('hex')]));
  const owner = new Map<number, string>();
  const conflicts = new Set<number>();
  const mismatches: MeasurementMismatch[] = [];
  for (const rim of rims) {
    for (const m of rim.measurements) {
      if (!m.active) continue;
      if (owner.has(m.index)) conflicts.add(m.index);
      owner.set(m.index, rim.label);
      const value = reported.get(m.index) ?? null;
      if (value === null || !m.alternatives.includes(value)) mismatches.push({ index: m.index, rim: rim.label, reported: value, expected: m.alternatives });
    }
  }
  return {
    compared: [...owner.keys()].sort((a, b) => a - b),
    mismatches: mismatches.sort((a, b) => a.index - b.index),
    conflicts: [...conflicts].sort((a, b) => a - b),
  };
}
