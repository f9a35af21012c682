import { parseVerifierKey } from '../../src/protocol/tlog/note.ts';
import type { VerifiedCheckpoint } from '../../src/protocol/tlog/checkpoint.ts';
import { fetchCheckpoint, type TrustedLog } from '../../src/verify/tlog/log-client.ts';
import { waitFor } from './wait-for.ts';

/** A service's transparency log as a client finds it: the origin and key its attestation binding names, and where that key came from. */
export async function attestedLog(serviceUrl: string): Promise<{ log: TrustedLog; keyOrigin: unknown }> {
  const doc = (await (await fetch(`${serviceUrl}/v1/verify/attestation`)).json()) as {
    binding: { transparency_log: { origin: string; vkey: string }; key_origin: { log?: unknown } };
  };
  const { origin, vkey } = doc.binding.transparency_log;
  return { log: { url: `${serviceUrl}/v1/log`, origin, key: parseVerifierKey(vkey) }, keyOrigin: doc.binding.key_origin.log };
}

/** Waits until the published checkpoint covers `size` entries (tests run the sequencer every 50 ms), and returns it. */
export async function integrated(log: TrustedLog, size: number): Promise<VerifiedCheckpoint> {
  return waitFor(`a checkpoint of ${size} entries`, async () => {
    const checkpoint = await fetchCheckpoint(log);
    return checkpoint.size >= size && checkpoint;
  });
}
