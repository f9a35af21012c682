/**
 * Release versions compared by Semantic Versioning 2.0.0 precedence (semver.org, section 11): major, minor and
 * patch numerically; a pre-release sorts before its release; pre-release identifiers compare numerically when
 * both are numeric, else as ASCII, and a numeric one sorts first; build metadata is ignored. A leading `v` (a
 * tag such as v1.2.0) is allowed.
 */
const SEMVER =
  /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;

interface ReleaseVersion {
  core: [bigint, bigint, bigint];
  pre: string[];
}

function parse(text: string): ReleaseVersion | undefined {
  const m = SEMVER.exec(text);
  if (m === null) return undefined;
  return { core: [BigInt(m[1]!), BigInt(m[2]!), BigInt(m[3]!)], pre: m[4] === undefined ? [] : m[4].split('.') };
}

export function isReleaseVersion(text: string): boolean {
  return parse(text) !== undefined;
}

function compareIdentifiers(a: string, b: string): number {
  const an = /^\d+$/.test(a);
  const bn = /^\d+$/.test(b);
  if (an && bn) return BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0;
  if (an !== bn) return an ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Negative when `a` comes before `b`, zero when equal in precedence, positive after; undefined when either is no SemVer. */
export function compareReleaseVersions(a: string, b: string): number | undefined {
  const x = parse(a);
  const y = parse(b);
  if (x === undefined || y === undefined) return undefined;
  for (let i = 0; i < 3; i++) if (x.core[i] !== y.core[i]) return x.core[i]! < y.core[i]! ? -1 : 1;
  if (x.pre.length === 0 || y.pre.length === 0) return y.pre.length - x.pre.length;
  for (let i = 0; i < Math.min(x.pre.length, y.pre.length); i++) {
    const c = compareIdentifiers(x.pre[i]!, y.pre[i]!);
    if (c !== 0) return c;
  }
  return x.pre.length - y.pre.length;
}
