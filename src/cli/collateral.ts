import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { decodeEvidenceText } from '../verify/evidence/evidence-text.ts';
import { DEFAULT_DEADLINE_SECONDS, DEFAULT_MAX_FILE_BYTES } from '../verify/evidence/collateral/bounded-fetch.ts';
import { CollateralAnswerError, CollateralFetchError } from '../verify/evidence/collateral/fetch-error.ts';
import { DEFAULT_COLLATERAL_SOURCES, fetchCollateral, type CollateralEvidence, type CollateralSources } from '../verify/evidence/collateral/fetch.ts';

export const COLLATERAL_USAGE = `usage:
  sigil collateral fetch [--tdx-quote FILE | --snp-report FILE [--amd-product NAME]]
                         [--gpu-report FILE --gpu-certs FILE] --out DIR
                         [--intel-pcs URL] [--intel-root-crl URL] [--amd-kds URL]
                         [--nvidia-rim-service URL] [--nvidia-ocsp URL]
                         [--max-file-bytes N] [--deadline SECONDS]

Fetches what the verifier needs to judge the evidence into DIR, the bundle "sigil verify-evidence --collateral DIR"
reads (docs/auditing.md, section 3):
  TDX quote      Intel PCS: TCB info for the PCK certificate's FMSPC and its issuer chain, the TD QE identity, the
                 PCK CRL of the CA that issued the PCK certificate and its issuer chain, the root CA's CRL
  SEV-SNP report AMD KDS: the VCEK for the report's CHIP_ID and REPORTED_TCB, the product's cert_chain and CRL
                 (for a VLEK-signed report: the VLEK cert_chain and CRL; the VLEK comes with the evidence)
  GPU report     NVIDIA: the driver RIM for the report's driver version and the VBIOS RIM for its VBIOS version,
                 project, project SKU and chip SKU (RIM service); an OCSP answer for every certificate of the
                 device chain above the GPU's own and of each RIM's signing chain, below the roots; and
                 nvidia-collateral.json, which names these files for the verifier
Nothing fetched is trusted: the verifier checks every signature against its built-in roots.

  --tdx-quote FILE       a TDX quote: raw bytes, hex (0x optional) or base64 text
  --snp-report FILE      an SEV-SNP attestation report (1184 bytes, raw)
  --amd-product NAME     Milan, Genoa or Turin, for a report (version 2) that names no CPU
  --gpu-report FILE      an NVIDIA GPU's SPDM report: hex text as nvtrust writes it, base64 text, or raw bytes
  --gpu-certs FILE       that GPU's device certificate chain (PEM, the device's own certificate first)
  --out DIR              the bundle directory (created if needed; files of the same name are replaced); written
                         only when every file was fetched: a failed fetch leaves it as it was
  --intel-pcs URL        default ${DEFAULT_COLLATERAL_SOURCES.intelPcs}
  --intel-root-crl URL   default ${DEFAULT_COLLATERAL_SOURCES.intelRootCrl}
  --amd-kds URL          default ${DEFAULT_COLLATERAL_SOURCES.amdKds}
  --nvidia-rim-service URL  default ${DEFAULT_COLLATERAL_SOURCES.nvidiaRimService}
  --nvidia-ocsp URL      default ${DEFAULT_COLLATERAL_SOURCES.nvidiaOcsp}
  --max-file-bytes N     refuse a file larger than N bytes (default ${DEFAULT_MAX_FILE_BYTES})
  --deadline SECONDS     give up when the whole fetch takes longer (default ${DEFAULT_DEADLINE_SECONDS})
A redirect is followed only to the same scheme, host and port.

Exit status: 0 fetched, 2 bad usage, 3 the evidence could not be read or a service did not answer (unreachable,
an HTTP error, past the deadline), 4 a service answered something that is not the file asked for (larger than the
cap, redirected to another host, not the kind of file its URL serves).
`;

export const COLLATERAL_EXIT = { ok: 0, usage: 2, failed: 3, wrongAnswer: 4 } as const;

export interface CollateralIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

const OPTIONS = {
  'tdx-quote': { type: 'string' },
  'snp-report': { type: 'string' },
  'amd-product': { type: 'string' },
  out: { type: 'string' },
  'intel-pcs': { type: 'string' },
  'intel-root-crl': { type: 'string' },
  'amd-kds': { type: 'string' },
  'gpu-report': { type: 'string' },
  'gpu-certs': { type: 'string' },
  'nvidia-rim-service': { type: 'string' },
  'nvidia-ocsp': { type: 'string' },
  'max-file-bytes': { type: 'string' },
  deadline: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

function positiveInteger(text: string | undefined, fallback: number): number | undefined {
  if (text === undefined) return fallback;
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
  const usage = (message: string) => {
    io.stderr.write(`sigil collateral: ${message}\n\n${COLLATERAL_USAGE}`);
    return COLLATERAL_EXIT.usage;
  };
  if (argv[0] !== 'fetch') {
    if (argv[0] === '--help' || argv[0] === '-h') {
      io.stdout.write(COLLATERAL_USAGE);
      return COLLATERAL_EXIT.ok;
    }
    return usage(argv[0] === undefined ? 'give a subcommand: fetch' : `unknown subcommand ${JSON.stringify(argv[0])}`);
  }
  let values: { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'string' ? string : boolean };
  try {
    values = parseArgs({ args: argv.slice(1), options: OPTIONS, allowPositionals: false }).values;
  } catch (err) {
    return usage((err as Error).message);
  }
  if (values.help === true) {
    io.stdout.write(COLLATERAL_USAGE);
    return COLLATERAL_EXIT.ok;
  }
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
  const maxFileBytes = positiveInteger(values['max-file-bytes'], DEFAULT_MAX_FILE_BYTES);
  if (maxFileBytes === undefined) return usage('--max-file-bytes is a whole number of bytes, at least 1');
  const deadlineSeconds = positiveInteger(values.deadline, DEFAULT_DEADLINE_SECONDS);
  if (deadlineSeconds === undefined) return usage('--deadline is a whole number of seconds, at least 1');
  const sources: CollateralSources = {
    intelPcs: values['intel-pcs'] ?? DEFAULT_COLLATERAL_SOURCES.intelPcs,
    intelRootCrl: values['intel-root-crl'] ?? DEFAULT_COLLATERAL_SOURCES.intelRootCrl,
    amdKds: values['amd-kds'] ?? DEFAULT_COLLATERAL_SOURCES.amdKds,
    nvidiaRimService: values['nvidia-rim-service'] ?? DEFAULT_COLLATERAL_SOURCES.nvidiaRimService,
    nvidiaOcsp: values['nvidia-ocsp'] ?? DEFAULT_COLLATERAL_SOURCES.nvidiaOcsp,
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
