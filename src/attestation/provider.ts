/** What every attestation provider (configfs-tsm hardware, or none) gives the server. */
import type { Tee } from '../protocol/attestation.ts';

export type { Tee };

export interface RawEvidence {
  tee: Tee;
  /** Lowercase hex launch digest: SNP MEASUREMENT or TDX MRTD. */
  measurement: string;
  /** The hardware evidence: SNP attestation report or TDX quote (configfs-tsm `outblob`). Empty for none. */
  outblob: Uint8Array;
  /** SNP certificate table (configfs-tsm `auxblob`, VCEK/VLEK, ASK, ARK). Empty when absent. */
  auxblob: Uint8Array;
  /** The report data the evidence binds (64 bytes). */
  reportData: Uint8Array;
}

export interface AttestationProvider {
  readonly tee: Tee;
  /** Produces fresh evidence whose REPORT_DATA is exactly `reportData` (64 bytes). */
  collect(reportData: Uint8Array): Promise<RawEvidence>;
}
