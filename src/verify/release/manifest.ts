import { ReleaseError } from './errors.ts';

/**
 * The release manifest (docs/release.md): an in-toto Statement whose predicate lists, per platform and VM
 * shape, what a Sigil deployment built from this release must measure, and until when that holds.
 */
export const IN_TOTO_PAYLOAD_TYPE = 'application/vnd.in-toto+json';
export const IN_TOTO_STATEMENT_TYPE = 'https://in-toto.io/Statement/v1';
export const RELEASE_PREDICATE_TYPE = 'https://sigil.dev/release-manifest/v1';

export type ReleasePlatform = 'sev-snp' | 'tdx';

/** The firmware a measurement assumes, and where a stranger gets the same bytes or hash. */
export interface ReleaseFirmware {
  name: string;
  /** SHA-384 of the firmware file, lowercase hex. */
  sha384: string;
  /** Where the hash comes from, in words or as a URL (a vendor's release, a reproducible build). */
  source: string;
}

/** One VM shape on one platform and the launch measurements it produces. */
export interface ReleaseTarget {
  platform: ReleasePlatform;
  /** The VM shape as `sigil measure` takes it (vCPUs, vCPU type, VMM, memory...): free-form scalars. */
  shape: Record<string, string | number | boolean>;
  firmware: ReleaseFirmware;
  /** SEV-SNP: `measurement`; TDX: `mrtd`, `rtmr0`, `rtmr1`, `rtmr2`. Lowercase hex. */
  measurements: Record<string, string>;
}

export interface ReleasePredicate {
  version: string;
  /** RFC 3339; past it the manifest is refused. */
  expires: string;
  image: { root_hash: string };
  /** Sigil's self-measurement: the manifest digest `sigil measure self` prints (`manifest_sha384`), SHA-384 hex. */
  sigil_self_measurement: string;
  targets: ReleaseTarget[];
}

export interface ReleaseStatement {
  _type: typeof IN_TOTO_STATEMENT_TYPE;
  subject: { name: string; digest: Record<string, string> }[];
  predicateType: typeof RELEASE_PREDICATE_TYPE;
  predicate: ReleasePredicate;
}

/** Byte lengths of the measurements each platform may list. */
const MEASUREMENT_BYTES: Record<ReleasePlatform, Record<string, number>> = {
  'sev-snp': { measurement: 48 },
  tdx: { mrtd: 48, rtmr0: 48, rtmr1: 48, rtmr2: 48 },
};

/** A statement that is not a Sigil release manifest; `path` names the offending field. */
export class ReleaseManifestError extends ReleaseError {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super('ERR_RELEASE_MANIFEST', `${path}: ${message}`);
  }
}

function object(value: unknown, path: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ReleaseManifestError(path, 'must be an object');
  return value as Record<string, unknown>;
}

function text(value: unknown, path: string): string {
  if (typeof value !== 'string' || value === '') throw new ReleaseManifestError(path, 'must be a non-empty string');
  return value;
}

function hex(value: unknown, path: string, bytes: number): string {
  const s = text(value, path);
  if (!/^[0-9a-f]*$/.test(s) || s.length !== bytes * 2) throw new ReleaseManifestError(path, `must be ${bytes * 2} lowercase hex digits (${bytes} bytes)`);
  return s;
}

function list(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value) || value.length === 0) throw new ReleaseManifestError(path, 'must be a non-empty list');
  return value;
}

function readTarget(value: unknown, path: string): ReleaseTarget {
  const t = object(value, path);
  const platform = t.platform;
  if (platform !== 'sev-snp' && platform !== 'tdx') throw new ReleaseManifestError(`${path}.platform`, 'must be "sev-snp" or "tdx"');
  const shape = object(t.shape, `${path}.shape`);
  for (const [key, v] of Object.entries(shape)) {
    if (!['string', 'number', 'boolean'].includes(typeof v)) throw new ReleaseManifestError(`${path}.shape.${key}`, 'must be a string, number or boolean');
  }
  const fw = object(t.firmware, `${path}.firmware`);
  const firmware = {
    name: text(fw.name, `${path}.firmware.name`),
    sha384: hex(fw.sha384, `${path}.firmware.sha384`, 48),
    source: text(fw.source, `${path}.firmware.source`),
  };
  const m = object(t.measurements, `${path}.measurements`);
  const allowed = MEASUREMENT_BYTES[platform];
  const measurements: Record<string, string> = {};
  for (const [key, v] of Object.entries(m)) {
    const bytes = allowed[key];
    if (bytes === undefined)
      throw new ReleaseManifestError(`${path}.measurements.${key}`, `is not a ${platform} measurement (allowed: ${Object.keys(allowed).join(', ')})`);
    measurements[key] = hex(v, `${path}.measurements.${key}`, bytes);
  }
  if (Object.keys(measurements).length === 0) throw new ReleaseManifestError(`${path}.measurements`, 'lists no measurement');
  return { platform, shape: shape as ReleaseTarget['shape'], firmware, measurements };
}

/** Reads a release statement from the DSSE payload; throws a ReleaseManifestError naming the first bad field. */
export function parseReleaseStatement(payload: Uint8Array): ReleaseStatement {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    throw new ReleaseManifestError('payload', 'is not JSON');
  }
  const s = object(doc, 'statement');
  if (s._type !== IN_TOTO_STATEMENT_TYPE) throw new ReleaseManifestError('_type', `must be ${IN_TOTO_STATEMENT_TYPE}`);
  if (s.predicateType !== RELEASE_PREDICATE_TYPE)
    throw new ReleaseManifestError('predicateType', `must be ${RELEASE_PREDICATE_TYPE}, got ${JSON.stringify(s.predicateType)}`);
  const subject = list(s.subject, 'subject').map((v, i) => {
    const o = object(v, `subject[${i}]`);
    const digest = object(o.digest, `subject[${i}].digest`);
    for (const [alg, d] of Object.entries(digest)) text(d, `subject[${i}].digest.${alg}`);
    return { name: text(o.name, `subject[${i}].name`), digest: digest as Record<string, string> };
  });
  const p = object(s.predicate, 'predicate');
  const expires = text(p.expires, 'predicate.expires');
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(expires) || Number.isNaN(Date.parse(expires))) {
    throw new ReleaseManifestError('predicate.expires', `must be an RFC 3339 time such as 2026-12-01T00:00:00Z, got ${JSON.stringify(expires)}`);
  }
  const image = object(p.image, 'predicate.image');
  const predicate: ReleasePredicate = {
    version: text(p.version, 'predicate.version'),
    expires,
    image: { root_hash: hex(image.root_hash, 'predicate.image.root_hash', 32) },
    sigil_self_measurement: hex(p.sigil_self_measurement, 'predicate.sigil_self_measurement', 48),
    targets: list(p.targets, 'predicate.targets').map((t, i) => readTarget(t, `predicate.targets[${i}]`)),
  };
  return { _type: IN_TOTO_STATEMENT_TYPE, subject, predicateType: RELEASE_PREDICATE_TYPE, predicate };
}
