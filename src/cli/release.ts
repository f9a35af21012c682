import { readFile, writeFile } from 'node:fs/promises';
import { parseReleaseStatement, ReleaseManifestError } from '../verify/release/manifest.ts';
import { signReleaseWithKey } from '../verify/release/sign-with-key.ts';
import type { ReleaseTrust } from '../verify/release/trust.ts';
import { verifyRelease } from '../verify/release/verify-release.ts';
import { isReleaseVersion } from '../verify/release/release-version.ts';
import type { ReleaseReferenceValues } from '../verify/reference/reference-values.ts';
import { formatChecks } from './check-report.ts';
import { RELEASE_TRUST_OPTIONS, releaseTrustFrom } from './release-trust.ts';
import { UsageError, UnreadableError } from './cli-errors.ts';
import { chooseSubcommand, parseCommandLine, refuseUsage, type CommandSpec } from './command-line.ts';

const EXIT_NOTE = `Exit status: 0 signed / verified (under --key: verified with waivers), 1 a check failed, 2 bad usage,
3 an input could not be read.`;

const signCommand = {
  name: 'release sign',
  prefix: 'sigil release',
  summary: `Signs a release manifest (an in-toto statement, docs/release.md) with a local EC P-256 key and prints the Sigstore
bundle (DSSE envelope, public-key hint, no transparency-log entry).`,
  operands: [['<STATEMENT.json>', 'the release manifest to sign']],
  options: {
    key: { type: 'string', value: 'KEY.pem', description: 'the EC P-256 signing key (required)' },
    out: { type: 'string', value: 'FILE', description: 'write the bundle here instead of to stdout' },
  },
  notes: EXIT_NOTE,
} as const satisfies CommandSpec;

const verifyCommand = {
  name: 'release verify',
  prefix: 'sigil release',
  summary: `Verifies a release manifest bundle offline: against the pinned key (--key), or against the public-good Sigstore
trust root @sigstore/tuf ships (or --trusted-root) and the expected signer (--identity and --issuer).`,
  operands: [['<FILE>', 'the Sigstore bundle of the release manifest']],
  options: {
    ...RELEASE_TRUST_OPTIONS,
    'min-version': { type: 'string', value: 'VERSION', description: 'refuse an older release (release.version)' },
    'max-validity-days': {
      type: 'string',
      value: 'N',
      description: "refuse a manifest valid longer than this (release.validity; default 30, the release workflow's own)",
    },
    'reference-out': {
      type: 'string',
      value: 'FILE',
      description:
        "with every check passed (under --key, release.tlog is waived: a keyed manifest is not logged), write the manifest's values as a reference-values file (what sigil verify --reference reads)",
    },
    at: { type: 'string', value: 'RFC3339', description: 'verify as at this time instead of now' },
  },
  notes: EXIT_NOTE,
} as const satisfies CommandSpec;

export const command = {
  name: 'release',
  summary: 'Signs or verifies a release manifest.',
  options: {},
  subcommands: [signCommand, verifyCommand],
} as const satisfies CommandSpec;

export const RELEASE_EXIT = { ok: 0, checkFailed: 1, usage: 2, unreadable: 3 } as const;

export interface ReleaseIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  now?: Date;
}

async function read(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new UnreadableError(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

async function sign(values: Record<string, string | undefined>, files: string[], io: ReleaseIo): Promise<number> {
  if (values.key === undefined) throw new UsageError('sign needs --key KEY.pem and one STATEMENT.json');
  const statementFile = await read(files[0]!, 'statement');
  let statement;
  try {
    statement = parseReleaseStatement(statementFile);
  } catch (err) {
    if (!(err instanceof ReleaseManifestError)) throw err;
    throw new UnreadableError(`${files[0]} is not a Sigil release manifest: ${err.message}`);
  }
  const key = (await read(values.key, 'signing key')).toString('utf8');
  let bundle: string;
  try {
    bundle = signReleaseWithKey(statement, key);
  } catch (err) {
    throw new UnreadableError(`signing key ${values.key}: ${(err as Error).message}`);
  }
  if (values.out === undefined) io.stdout.write(bundle);
  else await writeFile(values.out, bundle);
  // What was written, and where, on stderr: stdout stays the bundle alone when no --out is given.
  io.stderr.write(`signed ${files[0]} with ${values.key}: wrote its bundle (${Buffer.byteLength(bundle)} bytes) to ${values.out ?? 'stdout'}\n`);
  return RELEASE_EXIT.ok;
}

async function trustFrom(values: Record<string, string | undefined>): Promise<ReleaseTrust> {
  return releaseTrustFrom(values, { read, usage: (m) => new UsageError(m), unreadable: (m) => new UnreadableError(m) });
}

/** --min-version and --max-validity-days, as a reference-values file's `release:` section states them. */
function releaseRequirements(values: Record<string, string | undefined>): ReleaseReferenceValues {
  const requires: ReleaseReferenceValues = {};
  const min = values['min-version'];
  if (min !== undefined) {
    if (!isReleaseVersion(min)) throw new UsageError('--min-version is a semantic version, e.g. 1.2.0');
    requires.min_version = min;
  }
  const max = values['max-validity-days'];
  if (max !== undefined) {
    if (!/^[1-9]\d{0,3}$/.test(max) || Number(max) > 3650) throw new UsageError('--max-validity-days is a whole number of days from 1 to 3650');
    requires.max_validity_days = Number(max);
  }
  return requires;
}

async function verify(values: Record<string, string | undefined>, files: string[], io: ReleaseIo): Promise<number> {
  let now = io.now ?? new Date();
  if (values.at !== undefined) {
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(values.at) || Number.isNaN(Date.parse(values.at)))
      throw new UsageError('--at is an RFC 3339 time, e.g. 2026-12-01T00:00:00Z');
    now = new Date(values.at);
  }
  const requires = releaseRequirements(values);
  const trust = await trustFrom(values);
  let result;
  try {
    // As sigil verify --release reports it: with --key, release.tlog is waived for the pinned key.
    result = verifyRelease(await read(files[0]!, 'release manifest'), trust, now, requires);
  } catch (err) {
    if (err instanceof UnreadableError) throw err;
    throw new UnreadableError(`the trust root or key could not be used: ${(err as Error).message}`);
  }
  io.stdout.write(formatChecks(result.checks));
  const out = values['reference-out'];
  const ok = result.referenceValues !== undefined;
  if (ok && out !== undefined) {
    await writeFile(out, `${JSON.stringify(result.referenceValues, null, 2)}\n`);
    io.stdout.write(`reference values written to ${out}\n`);
  }
  return ok ? RELEASE_EXIT.ok : RELEASE_EXIT.checkFailed;
}

/** `sigil release` with its output given, so tests run it in-process. */
export async function releaseCommand(argv: string[], io: ReleaseIo): Promise<number> {
  const chosen = chooseSubcommand(command, argv, io);
  if (typeof chosen === 'number') return chosen;
  try {
    const parsed = parseCommandLine(chosen.sub, chosen.argv, io);
    if (typeof parsed === 'number') return parsed;
    const values = parsed.values as Record<string, string | undefined>;
    if (chosen.sub === signCommand) return await sign(values, parsed.positionals, io);
    return await verify(values, parsed.positionals, io);
  } catch (err) {
    if (err instanceof UsageError) return refuseUsage(chosen.sub, err.message, io);
    if (err instanceof UnreadableError) {
      io.stderr.write(`sigil release: ${err.message}\n`);
      return RELEASE_EXIT.unreadable;
    }
    throw err;
  }
}

export async function run(argv: string[]): Promise<number> {
  return releaseCommand(argv, { stdout: process.stdout, stderr: process.stderr });
}
