/**
 * The seed of sealed keys (`key_source: sealed`): one key the SEV-SNP firmware derives for this guest, expanded with
 * HKDF-SHA-256 into one independent key per purpose, so the receipt and HPKE keys never share key material.
 */
import { hkdfSync } from 'node:crypto';
import type { LoadedConfig } from '../config/load.ts';
import { deriveSevGuestKey } from './sev-guest-key.ts';

export type SealingConfig = LoadedConfig['attestation']['sealing'];

export interface SealedSeed {
  seed: Buffer;
  /** What the binding declares the keys bound to, e.g. `sev-snp:vcek:measurement+policy`. */
  boundTo: string;
}

export type SealedKeyPurpose = 'receipt' | 'hpke' | 'log' | 'log-state';

/** Asks the firmware for the seed; `library` is for tests (a stand-in for libc's open/ioctl). */
export function unsealSeed(sealing: SealingConfig, library?: string): SealedSeed {
  const fields = [...new Set(sealing.bind_to)].sort();
  const seed = deriveSevGuestKey(sealing.device, { rootKey: sealing.root_key, fields }, library);
  return { seed, boundTo: `sev-snp:${sealing.root_key}:${fields.join('+')}` };
}

/** `length` bytes of key material for one purpose; the label keeps each purpose's key independent of the others. */
export function sealedKeyMaterial(seed: SealedSeed, purpose: SealedKeyPurpose, length: number): Buffer {
  return Buffer.from(hkdfSync('sha256', seed.seed, Buffer.alloc(0), `sigil sealed ${purpose} key v1`, length));
}
