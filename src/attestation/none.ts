import type { AttestationProvider, RawEvidence } from './provider.ts';

/** The development provider: no hardware, so no evidence and an all-zero measurement that no verifier accepts as real. */
export const NONE_MEASUREMENT = '0'.repeat(96);

export function createNoneProvider(): AttestationProvider {
  return {
    tee: 'none',
    async collect(reportData: Uint8Array): Promise<RawEvidence> {
      return { tee: 'none', measurement: NONE_MEASUREMENT, outblob: new Uint8Array(0), auxblob: new Uint8Array(0), reportData };
    },
  };
}
