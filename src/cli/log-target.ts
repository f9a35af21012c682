import { parseVerifierKey, type NoteVerifier } from '../protocol/tlog/note.ts';
import { TlogError } from '../protocol/tlog/errors.ts';
import { notPinned, pass, type Check } from '../verify/check.ts';
import { fetchStartAttestation } from '../verify/service.ts';
import type { TrustedLog } from '../verify/tlog/log-client.ts';
import { UsageError } from './cli-errors.ts';

/** A log named on the command line: its URL prefix, and its key, pinned or read from the service's attestation binding. */
export interface LogTarget {
  log: TrustedLog;
  keyCheck: Check;
}

/** The service's URL, or the log's own prefix (ending in /v1/log), to the log prefix and the service's base. */
function prefixes(url: string): { log: string; service: string | undefined } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`${url} is not a URL`);
  }
  const bare = parsed.href.replace(/\/+$/, '');
  if (bare.endsWith('/v1/log')) return { log: bare, service: bare.slice(0, -'/v1/log'.length) };
  return { log: `${bare}/v1/log`, service: bare };
}

/** Whether `url` itself serves a `checkpoint`: a mirror of the log folder (docs/log.md#mirroring), not a service. */
async function servesCheckpoint(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/checkpoint`);
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * The log to check: `--log-key VKEY` pins its key (its name is the origin), and a URL that serves `checkpoint` itself
 * is the log's prefix (a static mirror), any other the service's; without it the key is the one the
 * service's attestation binding names, reported NOT PINNED since this command does not verify the hardware evidence.
 */
export async function resolveLog(url: string, logKey: string | undefined, witnesses: NoteVerifier[], required: number): Promise<LogTarget> {
  const { log: servicePrefix, service } = prefixes(url);
  const policy = { witnesses, required };
  if (logKey !== undefined) {
    const key = parseVerifierKey(logKey);
    const prefix = (await servesCheckpoint(url)) ? url.replace(/\/+$/, '') : servicePrefix;
    return { log: { url: prefix, origin: key.name, key, witnesses: policy }, keyCheck: pass('log.key', `the checkpoint key is pinned: ${logKey}`) };
  }
  if (service === undefined) throw new UsageError('give --log-key VKEY, or the service URL so its attestation binding names the key');
  let binding: { transparency_log?: { vkey?: unknown } } | undefined;
  try {
    binding = ((await fetchStartAttestation(service)) as { binding?: typeof binding } | null)?.binding;
  } catch (err) {
    throw new TlogError('ERR_TLOG_FETCH', `GET ${service}/v1/verify/attestation failed: ${(err as Error).message}`);
  }
  const vkey = binding?.transparency_log?.vkey;
  if (typeof vkey !== 'string')
    throw new TlogError('ERR_TLOG_VKEY', `the attestation binding of ${service} names no transparency log key: the service keeps no log`);
  const key = parseVerifierKey(vkey);
  return {
    log: { url: servicePrefix, origin: key.name, key, witnesses: policy },
    keyCheck: notPinned(
      'log.key',
      `${vkey}, read from the attestation binding of ${service}; this command does not verify the evidence (sigil verify ${service} does), so pin it with --log-key`,
    ),
  };
}

/** `--witness VKEY` (repeatable) and `--witnesses N`: N may not exceed the witnesses named. */
export function witnessPolicy(vkeys: string[] | undefined, required: string | undefined): { witnesses: NoteVerifier[]; required: number } {
  const witnesses = (vkeys ?? []).map(parseVerifierKey);
  if (witnesses.some((w) => w.type !== 4)) throw new UsageError('a --witness key is a cosignature/v1 verifier key (type 4), as `sigil witness keygen` prints');
  const n = required === undefined ? witnesses.length : Number(required);
  if (!Number.isInteger(n) || n < 0 || n > witnesses.length)
    throw new UsageError(`--witnesses ${required} must be between 0 and the ${witnesses.length} --witness keys given`);
  return { witnesses, required: n };
}
