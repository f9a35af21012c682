import { readFile } from 'node:fs/promises';
import { isNotPinned, verdictOf, waive } from '../verify/check.ts';
import type { Check } from '../verify/check.ts';
import { decodeEvidenceText } from '../verify/evidence/evidence-text.ts';
import { readAmdCollateralBundle, readCollateralBundle } from '../verify/evidence/collateral/bundle.ts';
import type { AmdCollateral } from '../verify/evidence/collateral/amd-collateral.ts';
import { readCertificate, readPemCertificates } from '../verify/evidence/certificate-chain.ts';
import { formatEventListing, type EventListing } from '../verify/evidence/event-log/measured-event.ts';
import type { TdxEventLogInput } from '../verify/evidence/event-log/tdx-event-log.ts';
import { DEFAULT_TRUST_ROOTS, type TrustRoots } from '../verify/evidence/trust-roots.ts';
import { readReferenceValues } from '../verify/reference/load.ts';
import { verifyRawEvidence, type RawEvidence, type RawEvidenceExpectations } from '../verify/raw-evidence.ts';
import { ReleaseError } from '../verify/release/errors.ts';
import { verifyReleaseReference } from '../verify/release/release-reference.ts';
import { RELEASE_TRUST_OPTIONS, releaseTrustFrom, releaseUsageProblem } from './release-trust.ts';
import { ReferenceValuesError, type ReferenceValues } from '../verify/reference/reference-values.ts';
import { formatChecks } from './check-report.ts';
import type { EvidenceContext, EvidenceExtension } from './evidence-extension.ts';
import { GPU_EVIDENCE } from './verify-evidence-gpu.ts';
import { UsageError, UnreadableError } from './cli-errors.ts';
import { parseCommandLine, refuseUsage, type CommandSpec, type OptionSpecs } from './command-line.ts';
import { isSigilError } from '../protocol/sigil-error.ts';

/** Exit statuses: 0 every check passed; 1 a check failed; 2 bad usage; 3 an input could not be read. */
export const EVIDENCE_EXIT = { ok: 0, checkFailed: 1, usage: 2, unreadable: 3 } as const;

export type { EvidenceContext, EvidenceExtension } from './evidence-extension.ts';

/** The extensions `sigil verify-evidence` runs: the place for GPU evidence (src/verify/gpu). */
export const EVIDENCE_EXTENSIONS: EvidenceExtension[] = [GPU_EVIDENCE];

const EXIT_NOTE = `Exit status: 0 verified (or verified with waivers, each listed), 1 not verified (a check failed or a value
is not pinned), 2 bad usage, 3 an input could not be read.`;

/** `sigil verify-evidence` with the options of `extensions` after its own. */
export function evidenceCommand(extensions: readonly EvidenceExtension[]): CommandSpec {
  return {
    name: 'verify-evidence',
    summary: `Verifies raw hardware evidence without a live service (docs/auditing.md): signatures and certificate chains up to
the built-in AMD and Intel roots, platform policy, the TDX event log replayed into RTMR0-3, reference
values, and Intel's collateral. Each check prints as PASS, FAIL, or ---- for a value nobody pinned.`,
    options: { ...BASE_OPTIONS, ...Object.assign({}, ...extensions.map((e) => e.options)) },
    notes: [...extensions.flatMap((e) => (e.notes === undefined ? [] : [e.notes])), EXIT_NOTE].join('\n\n'),
  };
}

interface Options {
  values: Record<string, string | boolean | undefined>;
  tdxQuote?: string;
  ccelTable?: string;
  ccelData?: string;
  eventLogJson?: string;
  snpReport?: string;
  vcek?: string;
  ask?: string;
  reference?: string;
  release?: string;
  collateral?: string;
  reportData?: string;
  allowUnbound: boolean;
  allowUnpinnedCode: boolean;
  at: Date;
  json: boolean;
}

const BASE_OPTIONS = {
  'tdx-quote': {
    type: 'string',
    value: 'FILE',
    description: 'a TDX quote (v4 or v5): raw bytes, hex (0x optional) or base64 text, or a JSON object with a hex "quote" (dstack\'s GetQuote response)',
  },
  'ccel-table': { type: 'string', value: 'FILE', description: 'the CCEL ACPI table (/sys/firmware/acpi/tables/CCEL), with --ccel-data' },
  'ccel-data': { type: 'string', value: 'FILE', description: 'the CCEL event log (/sys/firmware/acpi/tables/data/CCEL)' },
  'event-log-json': { type: 'string', value: 'FILE', description: 'dstack\'s JSON event log, or its GetQuote response holding "event_log"' },
  'snp-report': { type: 'string', value: 'FILE', description: 'an SEV-SNP attestation report (1184 bytes, raw)' },
  vcek: { type: 'string', value: 'FILE', description: 'the VCEK (or VLEK) certificate that signed it, PEM or DER' },
  ask: { type: 'string', value: 'FILE', description: 'the ASK (or ASVK) that signed the VCEK (default: the built-in ones)' },
  reference: { type: 'string', value: 'FILE', description: 'reference values (YAML or JSON, docs/auditing.md)' },
  release: {
    type: 'string',
    value: 'FILE',
    description:
      'a signed release manifest (docs/release.md), verified offline at --at; its values are reference values (--reference FILE may add what a release does not state), and any failed release.* check makes the verdict NOT VERIFIED. Whom it must come from: --key, or --identity and --issuer',
  },
  ...RELEASE_TRUST_OPTIONS,
  collateral: {
    type: 'string',
    value: 'DIR',
    description:
      'collateral, as "sigil collateral fetch" writes it. Intel: tcbinfo.json, qeidentity.json, tcb-signing-chain.pem, pck-crl.der, pck-crl-issuer-chain.pem, root-crl.der (or one dcap-qvl collateral JSON file). AMD: amd-crl.der, amd-vcek.der and amd-cert-chain.pem (used when --vcek and --ask are not given). NVIDIA: the RIMs and OCSP answers nvidia-collateral.json names (with --gpu-report, added to the reference file\'s gpu.rims and gpu.ocsp)',
  },
  'report-data': {
    type: 'string',
    value: 'HEX',
    description:
      'the 64 bytes REPORT_DATA must hold; without it the evidence is NOT VERIFIED (nothing says it is fresh or what it is bound to) unless --allow-unbound-evidence',
  },
  'allow-unbound-evidence': { type: 'boolean', description: 'accept REPORT_DATA compared with nothing: printed as WAIVED' },
  'allow-unpinned-code': { type: 'boolean', description: 'accept measured values no reference value pins: printed as WAIVED' },
  at: { type: 'string', value: 'RFC3339', description: 'the time certificates and collateral must be valid at (default: now)' },
  json: { type: 'boolean', description: 'print {verified, tee, measured, checks, events} as JSON' },
} as const satisfies OptionSpecs;

/** `sigil verify-evidence` as the CLI runs it, with GPU evidence. */
export const command = evidenceCommand(EVIDENCE_EXTENSIONS);

function parseOptions(values: Record<string, string | boolean | undefined>, extensions: readonly EvidenceExtension[], now: Date): Options {
  const text = (name: string) => (typeof values[name] === 'string' ? (values[name] as string) : undefined);
  const o: Options = {
    values,
    at: now,
    json: values.json === true,
    allowUnbound: values['allow-unbound-evidence'] === true,
    allowUnpinnedCode: values['allow-unpinned-code'] === true,
  };
  const set = (key: keyof Options, name: string) => {
    const v = text(name);
    if (v !== undefined) (o as unknown as Record<string, unknown>)[key] = v;
  };
  set('tdxQuote', 'tdx-quote');
  set('ccelTable', 'ccel-table');
  set('ccelData', 'ccel-data');
  set('eventLogJson', 'event-log-json');
  set('snpReport', 'snp-report');
  set('vcek', 'vcek');
  set('ask', 'ask');
  set('reference', 'reference');
  set('release', 'release');
  const releaseProblem = releaseUsageProblem(o.release, values);
  if (releaseProblem !== undefined) throw new UsageError(releaseProblem);
  set('collateral', 'collateral');
  set('reportData', 'report-data');
  const at = text('at');
  if (at !== undefined) {
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(at) || Number.isNaN(Date.parse(at)))
      throw new UsageError('--at is an RFC 3339 time, e.g. 2023-06-20T00:00:00Z');
    o.at = new Date(at);
  }
  const wanted = extensions.filter((e) => e.wants(values));
  const kinds = [o.tdxQuote !== undefined, o.snpReport !== undefined].filter(Boolean).length;
  if (kinds === 0 && wanted.length === 0)
    throw new UsageError(
      extensions.some((e) => e.name === 'gpu') ? 'give --tdx-quote FILE, --snp-report FILE or --gpu-report FILE' : 'give --tdx-quote FILE or --snp-report FILE',
    );
  for (const extension of wanted) {
    const problem = extension.usageProblem?.(values);
    if (problem !== undefined) throw new UsageError(problem);
  }
  if (kinds > 1) throw new UsageError('give --tdx-quote or --snp-report, not both');
  if ((o.ccelTable !== undefined || o.ccelData !== undefined || o.eventLogJson !== undefined) && o.tdxQuote === undefined) {
    throw new UsageError('--ccel-table, --ccel-data and --event-log-json go with --tdx-quote');
  }
  if (o.collateral !== undefined && o.tdxQuote === undefined && o.snpReport === undefined && wanted.length === 0)
    throw new UsageError(`--collateral goes with --tdx-quote or --snp-report${extensions.some((e) => e.name === 'gpu') ? ' or --gpu-report' : ''}`);
  if (o.ccelTable !== undefined && o.ccelData === undefined) throw new UsageError('--ccel-table needs --ccel-data (the log it describes)');
  if (o.ccelData !== undefined && o.eventLogJson !== undefined) throw new UsageError('give --ccel-data or --event-log-json, not both');
  if ((o.vcek !== undefined || o.ask !== undefined) && o.snpReport === undefined) throw new UsageError('--vcek and --ask go with --snp-report');
  if (o.ask !== undefined && o.vcek === undefined) throw new UsageError('--ask needs --vcek');
  if (o.reportData !== undefined && !/^[0-9a-fA-F]{128}$/.test(o.reportData)) throw new UsageError('--report-data is 64 bytes of hex (128 digits)');
  return o;
}

async function read(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new UnreadableError(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** A quote as raw bytes, hex (optionally 0x) or base64 text, or dstack's JSON with a hex "quote". */
function quoteBytes(file: Buffer, path: string): Uint8Array {
  const text = file.toString('latin1').trim();
  let encoded: Uint8Array = file;
  if (text.startsWith('{')) {
    let quote: unknown;
    try {
      quote = (JSON.parse(text) as { quote?: unknown }).quote;
    } catch {
      throw new UnreadableError(`${path} is JSON-like but not JSON`);
    }
    if (typeof quote !== 'string') throw new UnreadableError(`${path} has no hex "quote"`);
    encoded = Buffer.from(quote, 'latin1');
  }
  try {
    return decodeEvidenceText(encoded, path);
  } catch (err) {
    throw new UnreadableError((err as Error).message);
  }
}

export interface EvidenceReport {
  verified: boolean;
  tee?: 'tdx' | 'sev-snp';
  measured: Record<string, unknown>;
  checks: Check[];
  events?: EventListing[];
}

/** The TDX quote, its event log and Intel's collateral, read from the files the flags name. */
async function readTdx(o: Options): Promise<RawEvidence> {
  const evidence: Extract<RawEvidence, { tee: 'tdx' }> = { tee: 'tdx', quote: quoteBytes(await read(o.tdxQuote!, 'TDX quote'), o.tdxQuote!) };
  if (o.collateral !== undefined) {
    try {
      evidence.collateral = await readCollateralBundle(o.collateral);
    } catch (err) {
      throw new UnreadableError(
        `cannot read the collateral bundle ${o.collateral}: ${isSigilError(err) ? err.message : ((err as NodeJS.ErrnoException).code ?? (err as Error).message)}`,
      );
    }
  }
  const input: TdxEventLogInput = {};
  if (o.ccelTable !== undefined) input.ccelTable = new Uint8Array(await read(o.ccelTable, 'CCEL table'));
  if (o.ccelData !== undefined) input.ccelData = new Uint8Array(await read(o.ccelData, 'CCEL data'));
  if (o.eventLogJson !== undefined) {
    try {
      input.dstackLog = JSON.parse((await read(o.eventLogJson, 'event log')).toString('utf8')) as unknown;
    } catch (err) {
      if (err instanceof UnreadableError) throw err;
      throw new UnreadableError(`${o.eventLogJson} is not JSON`);
    }
  }
  evidence.eventLog = input;
  return evidence;
}

async function amdCollateral(dir: string | undefined): Promise<AmdCollateral> {
  if (dir === undefined) return {};
  try {
    return await readAmdCollateralBundle(dir);
  } catch (err) {
    throw new UnreadableError(`cannot read the collateral bundle ${dir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** The SEV-SNP report and the certificates that signed it, read from the files the flags name and the AMD collateral bundle (--collateral). */
async function readSnp(o: Options): Promise<RawEvidence> {
  const evidence: Extract<RawEvidence, { tee: 'sev-snp' }> = { tee: 'sev-snp', report: new Uint8Array(await read(o.snpReport!, 'SEV-SNP report')) };
  const bundle = await amdCollateral(o.collateral);
  for (const [path, kind] of [
    [o.vcek, 'vcek'],
    [o.ask, 'ask'],
  ] as const) {
    if (path === undefined) continue;
    const file = await read(path, kind.toUpperCase());
    try {
      evidence[kind] = new Uint8Array(
        readCertificate(file.toString('latin1').includes('-----BEGIN') ? file.toString('latin1') : file, `${kind.toUpperCase()} ${path}`).raw,
      );
    } catch (err) {
      throw new UnreadableError((err as Error).message);
    }
  }
  if (evidence.vcek === undefined && bundle.vcek !== undefined) evidence.vcek = bundle.vcek;
  if (evidence.ask === undefined && bundle.certChain !== undefined) {
    try {
      const intermediate = readPemCertificates(bundle.certChain, 'amd-cert-chain.pem')[0];
      if (intermediate !== undefined) evidence.ask = new Uint8Array(intermediate.raw);
    } catch (err) {
      throw new UnreadableError((err as Error).message);
    }
  }
  if (bundle.crl !== undefined) evidence.crl = bundle.crl;
  return evidence;
}

async function verifyFiles(o: Options, reference: ReferenceValues | undefined, roots: TrustRoots): Promise<EvidenceReport> {
  if (o.tdxQuote === undefined && o.snpReport === undefined) return { verified: false, measured: {}, checks: [] };
  const evidence = o.tdxQuote !== undefined ? await readTdx(o) : await readSnp(o);
  const expect: RawEvidenceExpectations = { at: o.at, roots };
  if (o.reportData !== undefined) expect.reportData = o.reportData;
  if (reference !== undefined) expect.reference = reference;
  const result = await verifyRawEvidence(evidence, expect);
  return { verified: false, ...result };
}

export function formatEvidenceReport(r: EvidenceReport): string {
  const lines: string[] = [];
  const measured = Object.entries(r.measured);
  if (measured.length > 0) {
    lines.push(`measured (${r.tee === 'tdx' ? 'TDX' : r.tee === 'sev-snp' ? 'SEV-SNP' : 'evidence'}):`);
    const line = (k: string, v: unknown): void => {
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) for (const [k2, v2] of Object.entries(v)) line(`${k}.${k2}`, v2);
      else lines.push(`  ${k} ${typeof v === 'string' || typeof v === 'number' ? v : JSON.stringify(v)}`);
    };
    for (const [k, v] of measured) line(k, v);
  }
  if (r.events !== undefined && r.events.length > 0) {
    lines.push(`event log (${r.events.length} events; "measured data" is exactly what the digest covers):`);
    lines.push(...r.events.map(formatEventListing));
  }
  return (lines.length > 0 ? lines.join('\n') + '\n' : '') + formatChecks(r.checks);
}

export interface EvidenceIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** The AMD and Intel roots to trust; the built-in ones unless a test brings its own. */
  roots?: TrustRoots;
  /** The time used when --at is not given. */
  now?: Date;
  extensions?: readonly EvidenceExtension[];
}

/** The auditor's own reference values file; one that cannot be read or parsed is an input that could not be read. */
async function ownReference(path: string): Promise<ReferenceValues> {
  await read(path, 'reference values');
  try {
    return await readReferenceValues(path);
  } catch (err) {
    throw new UnreadableError(`reference values ${path}: ${(err as Error).message}`);
  }
}

/** `sigil verify-evidence` with its output given, so tests run it in-process. */
export async function verifyEvidenceCommand(argv: string[], io: EvidenceIo): Promise<number> {
  const extensions = io.extensions ?? EVIDENCE_EXTENSIONS;
  const spec = evidenceCommand(extensions);
  const line = parseCommandLine(spec, argv, io);
  if (typeof line === 'number') return line;
  let o: Options;
  try {
    // No option of this command is `multiple`: each value is one string or a flag.
    o = parseOptions(line.values as Record<string, string | boolean | undefined>, extensions, io.now ?? new Date());
  } catch (err) {
    return refuseUsage(spec, (err as Error).message, io);
  }
  let report: EvidenceReport;
  try {
    let reference = o.reference === undefined ? undefined : await ownReference(o.reference);
    let releaseChecks: Check[] = [];
    if (o.release !== undefined) {
      const trust = await releaseTrustFrom(o.values, { read, usage: (m) => new UsageError(m), unreadable: (m) => new UnreadableError(m) });
      const bundle = await read(o.release, 'release manifest');
      try {
        const release = verifyReleaseReference(bundle, trust, reference, o.at);
        releaseChecks = release.checks;
        reference = release.values;
      } catch (err) {
        if (err instanceof ReleaseError) throw new UnreadableError(`the trust root or key could not be used: ${err.message}`);
        if (err instanceof ReferenceValuesError) throw new UnreadableError(`reference values ${o.reference!}: ${err.message}`);
        throw err;
      }
    }
    const roots = io.roots ?? DEFAULT_TRUST_ROOTS;
    report = await verifyFiles(o, reference, roots);
    report.checks.unshift(...releaseChecks);
    const ctx: EvidenceContext = { at: o.at, reference, read };
    if (o.collateral !== undefined) ctx.collateral = o.collateral;
    for (const extension of extensions.filter((e) => e.wants(o.values))) {
      const extra = await extension.verify(o.values, ctx);
      report.checks.push(...extra.checks);
      if (extra.measured !== undefined) report.measured[extension.name] = extra.measured;
    }
  } catch (err) {
    const message = (err as Error).message;
    const code = err instanceof UnreadableError ? 'ERR_EVIDENCE_UNREADABLE' : 'ERR_EVIDENCE_INTERNAL';
    if (o.json) io.stdout.write(JSON.stringify({ verified: false, error: { code, message } }, null, 2) + '\n');
    else io.stderr.write(`sigil verify-evidence: could not verify: ${message}\n`);
    return EVIDENCE_EXIT.unreadable;
  }
  report.checks = report.checks.map((c) => {
    if (c.name === 'evidence.report_data' && isNotPinned(c) && o.allowUnbound)
      return waive(c, '--allow-unbound-evidence: evidence neither fresh nor bound to anything is accepted');
    if (c.name !== 'evidence.report_data' && isNotPinned(c) && o.allowUnpinnedCode) return waive(c, '--allow-unpinned-code: values nobody pinned are accepted');
    return c;
  });
  report.verified = verdictOf(report.checks).outcome !== 'not-verified';
  io.stdout.write(o.json ? JSON.stringify(report, null, 2) + '\n' : formatEvidenceReport(report));
  return report.verified ? EVIDENCE_EXIT.ok : EVIDENCE_EXIT.checkFailed;
}

export async function run(argv: string[]): Promise<number> {
  return verifyEvidenceCommand(argv, { stdout: process.stdout, stderr: process.stderr });
}
