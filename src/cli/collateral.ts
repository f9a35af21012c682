import { readFile } from 'node:fs/promises';
import { chooseSubcommand, parseCommandLine, refuseUsage, type CommandSpec } from './command-line.ts';
import { decodeEvidenceText } from '../verify/evidence/evidence-text.ts';
import { DEFAULT_DEADLINE_SECONDS, DEFAULT_MAX_FILE_BYTES } from '../verify/evidence/collateral/bounded-fetch.ts';
import { CollateralAnswerError, CollateralFetchError } from '../verify/evidence/collateral/fetch-error.ts';
import { DEFAULT_COLLATERAL_SOURCES, fetchCollateral, type CollateralEvidence, type CollateralSources } from '../verify/evidence/collateral/fetch.ts';

const fetchCommand = {
  name: 'collateral fetch',
  prefix: 'sigil collateral',
  summary: `Fetches what the verifier needs to judge the evidence into DIR, the bundle "sigil verify-evidence --collateral DIR"
reads (docs/auditing.md, section 3).`,
  options: {
    'tdx-quote': { type: 'string', value: 'FILE', description: 'a TDX quote: raw bytes, hex (0x optional) or base64 text' },
    'snp-report': { type: 'string', value: 'FILE', description: 'an SEV-SNP attestation report (1184 bytes, raw)' },
    'amd-product': { type: 'string', value: 'NAME', description: 'Milan, Genoa or Turin, for a report (version 2) that names no CPU' },
    'gpu-report': {
      type: 'string',
      value: 'FILE',
      description: "an NVIDIA GPU's SPDM report: hex text as nvtrust writes it, base64 text, or raw bytes",
    },
    'gpu-certs': { type: 'string', value: 'FILE', description: "that GPU's device certificate chain (PEM, the device's own certificate first)" },
    out: {
      type: 'string',
      value: 'DIR',
      description:
        'the bundle directory (created if needed; files of the same name are replaced); written only when every file was fetched: a failed fetch leaves it as it was',
    },
    'intel-pcs': { type: 'string', value: 'URL', description: "Intel's PCS", default: DEFAULT_COLLATERAL_SOURCES.intelPcs },
    'intel-root-crl': { type: 'string', value: 'URL', description: "Intel's root CA CRL", default: DEFAULT_COLLATERAL_SOURCES.intelRootCrl },
    'amd-kds': { type: 'string', value: 'URL', description: "AMD's KDS", default: DEFAULT_COLLATERAL_SOURCES.amdKds },
    'nvidia-rim-service': { type: 'string', value: 'URL', description: "NVIDIA's RIM service", default: DEFAULT_COLLATERAL_SOURCES.nvidiaRimService },
    'nvidia-ocsp': { type: 'string', value: 'URL', description: "NVIDIA's OCSP responder", default: DEFAULT_COLLATERAL_SOURCES.nvidiaOcsp },
    'max-file-bytes': { type: 'string', value: 'N', description: 'refuse a file larger than N bytes', default: String(DEFAULT_MAX_FILE_BYTES) },
    deadline: { type: 'string', value: 'SECONDS', description: 'give up when the whole fetch takes longer', default: String(DEFAULT_DEADLINE_SECONDS) },
  },
  notes: `What is fetched:
  TDX quote      Intel PCS: TCB info for the PCK certificate's FMSPC and its issuer chain, the TD QE identity, the
                 PCK CRL of the CA that issued the PCK certificate and its issuer chain, the root CA's CRL
  SEV-SNP report AMD KDS: the VCEK for the report's CHIP_ID and REPORTED_TCB, the product's cert_chain and CRL
                 (for a VLEK-signed report: the VLEK cert_chain and CRL; the VLEK comes with the evidence)
  GPU report     NVIDIA: the driver RIM for the report's driver version and the VBIOS RIM for its VBIOS version,
                 project, project SKU and chip SKU (RIM service); an OCSP answer for every certificate of the
                 device chain above the GPU's own and of each RIM's signing chain, below the roots; and
                 nvidia-collateral.json, which names these files for the verifier
Nothing fetched is trusted: the verifier checks every signature against its built-in roots.
A redirect is followed only to the same scheme, host and port.

Exit status: 0 fetched, 2 bad usage, 3 the evidence could not be read or a service did not answer (unreachable,
an HTTP error, past the deadline), 4 a service answered something that is not the file asked for (larger than the
cap, redirected to another host, not the kind of file its URL serves).`,
} as const satisfies CommandSpec;

export const command = {
  name: 'collateral',
  summary: 'Fetches Intel PCS, AMD KDS and NVIDIA (RIM, OCSP) collateral for evidence into a bundle.',
  options: {},
  subcommands: [fetchCommand],
} as const satisfies CommandSpec;

export const COLLATERAL_EXIT = { ok: 0, usage: 2, failed: 3, wrongAnswer: 4 } as const;

export interface CollateralIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

function positiveInteger(text: string): number | undefined {
  return /^[1-9][0-9]{0,12}$/.test(text) ? Number(text) : undefined;
}

/** What to do when a vendor's service cannot be reached from here, naming the flags for the evidence given. */
function offlineHint(evidence: CollateralEvidence): string {
  const flags = [
    ...(evidence.tdxQuote === undefined ? [] : ['--intel-pcs URL', '--intel-root-crl URL']),
    ...(evidence.snpReport === undefined ? [] : ['--amd-kds URL']),
    ...(evidence.gpuReport === undefined ? [] : ['--nvidia-rim-service URL', '--nvidia-ocsp URL']),
  ];
  return `If this machine is offline, run the same command on one that is online and copy the directory, or name a mirror you can reach with ${flags.join(', ')}. Nothing was written.`;
}

/** `sigil collateral fetch` with its output given, so tests run it in-process. */
export async function collateralCommand(argv: string[], io: CollateralIo): Promise<number> {
  const usage = (message: string) => refuseUsage(fetchCommand, message, io);
  const chosen = chooseSubcommand(command, argv, io);
  if (typeof chosen === 'number') return chosen;
  const parsed = parseCommandLine(fetchCommand, chosen.argv, io);
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  const quote = values['tdx-quote'];
  const report = values['snp-report'];
  const gpuReport = values['gpu-report'];
  const gpuCerts = values['gpu-certs'];
  if (quote !== undefined && report !== undefined) return usage('give --tdx-quote FILE or --snp-report FILE, not both');
  if ((gpuReport === undefined) !== (gpuCerts === undefined)) return usage('--gpu-report and --gpu-certs go together');
  if (quote === undefined && report === undefined && gpuReport === undefined) return usage('give --tdx-quote FILE, --snp-report FILE or --gpu-report FILE');
  if (values.out === undefined) return usage('give --out DIR');
  if (values['amd-product'] !== undefined && !['Milan', 'Genoa', 'Turin'].includes(values['amd-product']))
    return usage('--amd-product is Milan, Genoa or Turin');
  const maxFileBytes = positiveInteger(values['max-file-bytes']);
  if (maxFileBytes === undefined) return usage('--max-file-bytes is a whole number of bytes, at least 1');
  const deadlineSeconds = positiveInteger(values.deadline);
  if (deadlineSeconds === undefined) return usage('--deadline is a whole number of seconds, at least 1');
  const sources: CollateralSources = {
    intelPcs: values['intel-pcs'],
    intelRootCrl: values['intel-root-crl'],
    amdKds: values['amd-kds'],
    nvidiaRimService: values['nvidia-rim-service'],
    nvidiaOcsp: values['nvidia-ocsp'],
  };
  const evidence: CollateralEvidence = {};
  try {
    if (quote !== undefined) evidence.tdxQuote = decodeEvidenceText(new Uint8Array(await readFile(quote)), quote);
    if (report !== undefined) evidence.snpReport = new Uint8Array(await readFile(report));
    if (values['amd-product'] !== undefined) evidence.amdProduct = values['amd-product'];
    if (gpuReport !== undefined) {
      evidence.gpuReport = decodeEvidenceText(new Uint8Array(await readFile(gpuReport)), gpuReport);
      evidence.gpuCertificates = await readFile(gpuCerts!, 'latin1');
    }
    const fetched = await fetchCollateral(evidence, values.out, sources, { maxFileBytes, deadlineSeconds });
    for (const f of fetched) io.stdout.write(`${f.file} (${f.bytes} bytes) ${f.url === undefined ? 'written here' : `from ${f.url}`}\n`);
    return COLLATERAL_EXIT.ok;
  } catch (err) {
    const hint = err instanceof CollateralFetchError && /could not be reached/.test(err.message) ? `\n${offlineHint(evidence)}` : '';
    io.stderr.write(`sigil collateral fetch: ${(err as Error).message}${hint}\n`);
    return err instanceof CollateralAnswerError ? COLLATERAL_EXIT.wrongAnswer : COLLATERAL_EXIT.failed;
  }
}

export async function run(argv: string[]): Promise<number> {
  return collateralCommand(argv, { stdout: process.stdout, stderr: process.stderr });
}
