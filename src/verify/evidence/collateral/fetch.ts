import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { toHex } from '../byte-reader.ts';
import { readPemCertificates } from '../certificate-chain.ts';
import { readSnpReport } from '../snp-report.ts';
import { snpProductLine } from '../snp-guest-checks.ts';
import { reportCpuFamily, tcbParts } from '../snp-policy.ts';
import { readTdxQuote } from '../tdx-quote.ts';
import { AMD_COLLATERAL_FILES } from './amd-collateral.ts';
import { COLLATERAL_FILES } from './intel-collateral.ts';
import { readPckExtension } from './pck-extension.ts';

/** Where collateral comes from. The defaults are the vendors' real services; tests and mirrors give their own. */
export interface CollateralSources {
  /** Intel PCS, e.g. https://api.trustedservices.intel.com (…/tdx/certification/v4/tcb, /qe/identity; …/sgx/certification/v4/pckcrl). */
  intelPcs: string;
  /** The Intel SGX Root CA's CRL. */
  intelRootCrl: string;
  /** AMD KDS, e.g. https://kdsintf.amd.com (…/vcek/v1/{product}/…, …/vlek/v1/{product}/…). */
  amdKds: string;
}

export const DEFAULT_COLLATERAL_SOURCES: CollateralSources = {
  intelPcs: 'https://api.trustedservices.intel.com',
  intelRootCrl: 'https://certificates.trustedservices.intel.com/IntelSGXRootCA.der',
  amdKds: 'https://kdsintf.amd.com',
};

/** The evidence collateral is fetched for: a TDX quote or an SEV-SNP report (raw bytes), and for SNP the product line when the report names none. */
export interface CollateralEvidence {
  tdxQuote?: Uint8Array;
  snpReport?: Uint8Array;
  amdProduct?: string;
}

/** One file a fetcher wrote into the bundle, with the URL it came from. */
export interface FetchedFile {
  file: string;
  url: string;
  bytes: number;
}

/**
 * A collateral fetcher: looks at the evidence and, when it applies, fetches what the verifier needs into `dir`.
 * Returns null when the evidence is not its kind. COLLATERAL_FETCHERS lists them; NVIDIA RIMs and OCSP answers for
 * GPU evidence (src/verify/gpu) plug in as one more entry.
 */
export interface CollateralFetcher {
  name: string;
  fetch(evidence: CollateralEvidence, dir: string, sources: CollateralSources, get: HttpGet): Promise<FetchedFile[] | null>;
}

export interface HttpResponse {
  body: Uint8Array;
  header(name: string): string | undefined;
}
export type HttpGet = (url: string) => Promise<HttpResponse>;

/** Thrown when a service answers with an error or not at all; the message names the URL and status. */
export class CollateralFetchError extends Error {
  readonly code = 'ERR_COLLATERAL_FETCH';
}

/** GET with Node's fetch; a non-2xx answer throws, naming the URL and status. */
export const httpGet: HttpGet = async (url) => {
  let response: Response;
  try {
    response = await fetch(url, { redirect: 'follow' });
  } catch (err) {
    throw new CollateralFetchError(`GET ${url}: ${(err as Error).message}`);
  }
  if (!response.ok) throw new CollateralFetchError(`GET ${url}: HTTP ${response.status}`);
  const body = new Uint8Array(await response.arrayBuffer());
  return { body, header: (name) => response.headers.get(name) ?? undefined };
};

const trimSlash = (url: string) => url.replace(/\/+$/, '');

async function save(dir: string, file: string, url: string, content: Uint8Array | string): Promise<FetchedFile> {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  await writeFile(join(dir, file), bytes);
  return { file, url, bytes: bytes.length };
}

/** Intel PCS's issuer-chain headers are URL-encoded PEM. */
function issuerChain(response: HttpResponse, header: string, url: string): string {
  const value = response.header(header);
  if (value === undefined) throw new CollateralFetchError(`GET ${url}: no ${header} header`);
  return decodeURIComponent(value);
}

/** Intel PCS (TDX, API v4): TCB info for the PCK certificate's FMSPC, the TD QE identity, the PCK CRL of its CA, the root CA's CRL. */
export const INTEL_PCS_FETCHER: CollateralFetcher = {
  name: 'intel-pcs',
  async fetch(evidence, dir, sources, get) {
    if (evidence.tdxQuote === undefined) return null;
    const quote = readTdxQuote(evidence.tdxQuote);
    const pck = readPemCertificates(quote.pckChainPem, 'PCK chain')[0];
    if (pck === undefined) throw new CollateralFetchError('the quote carries no PCK certificate: its FMSPC is unknown');
    const fmspc = readPckExtension(pck).fmspc.toUpperCase();
    const ca = /Processor/i.test(pck.issuer) ? 'processor' : 'platform';
    const pcs = trimSlash(sources.intelPcs);
    const out: FetchedFile[] = [];
    const tcbUrl = `${pcs}/tdx/certification/v4/tcb?fmspc=${fmspc}`;
    const tcb = await get(tcbUrl);
    out.push(await save(dir, COLLATERAL_FILES.tcbInfo, tcbUrl, tcb.body));
    out.push(await save(dir, COLLATERAL_FILES.tcbSigningChain, tcbUrl, issuerChain(tcb, 'TCB-Info-Issuer-Chain', tcbUrl)));
    const qeUrl = `${pcs}/tdx/certification/v4/qe/identity`;
    out.push(await save(dir, COLLATERAL_FILES.qeIdentity, qeUrl, (await get(qeUrl)).body));
    const crlUrl = `${pcs}/sgx/certification/v4/pckcrl?ca=${ca}&encoding=der`;
    const crl = await get(crlUrl);
    out.push(await save(dir, COLLATERAL_FILES.pckCrl, crlUrl, crl.body));
    out.push(await save(dir, COLLATERAL_FILES.pckCrlIssuerChain, crlUrl, issuerChain(crl, 'SGX-PCK-CRL-Issuer-Chain', crlUrl)));
    out.push(await save(dir, COLLATERAL_FILES.rootCrl, sources.intelRootCrl, (await get(sources.intelRootCrl)).body));
    return out;
  },
};

/** The VCEK's KDS query: the chip id (8 bytes on Turin) and the REPORTED_TCB's security patch levels. */
function vcekPath(product: string, chipId: Uint8Array, reportedTcb: bigint, family: number | undefined): string {
  const t = tcbParts(reportedTcb, family);
  const turin = product === 'Turin';
  const hwid = toHex(turin ? chipId.subarray(0, 8) : chipId);
  const spl = [...(turin ? [`fmcSPL=${t.fmc}`] : []), `blSPL=${t.bootloader}`, `teeSPL=${t.tee}`, `snpSPL=${t.snp}`, `ucodeSPL=${t.microcode}`].join('&');
  return `${hwid}?${spl}`;
}

/** AMD KDS: for a VCEK-signed report the VCEK, the product's cert_chain (ASK, ARK) and CRL; for a VLEK the vlek cert_chain (ASVK, ARK) and CRL (the VLEK itself comes with the evidence). */
export const AMD_KDS_FETCHER: CollateralFetcher = {
  name: 'amd-kds',
  async fetch(evidence, dir, sources, get) {
    if (evidence.snpReport === undefined) return null;
    const report = readSnpReport(evidence.snpReport);
    const family = reportCpuFamily(evidence.snpReport, report.version);
    const product = evidence.amdProduct ?? (family === undefined ? null : snpProductLine(family, evidence.snpReport[0x189]!));
    if (product === null || product === undefined)
      throw new CollateralFetchError(`report version ${report.version} names no AMD product line Sigil knows: give it (--amd-product Milan, Genoa or Turin)`);
    if (report.signingKey !== 'vcek' && report.signingKey !== 'vlek')
      throw new CollateralFetchError(`the report is signed by no endorsement key (${report.signingKey})`);
    const base = `${trimSlash(sources.amdKds)}/${report.signingKey}/v1/${product}`;
    const out: FetchedFile[] = [];
    if (report.signingKey === 'vcek') {
      const vcekUrl = `${base}/${vcekPath(product, report.chipId, report.reportedTcb.raw, family)}`;
      out.push(await save(dir, AMD_COLLATERAL_FILES.vcek, vcekUrl, (await get(vcekUrl)).body));
    }
    const chainUrl = `${base}/cert_chain`;
    const chain = Buffer.from((await get(chainUrl)).body).toString('utf8');
    if (readPemCertificates(chain, 'cert_chain').length < 2) throw new CollateralFetchError(`GET ${chainUrl}: not a PEM chain of two certificates`);
    out.push(await save(dir, AMD_COLLATERAL_FILES.certChain, chainUrl, chain));
    const crlUrl = `${base}/crl`;
    out.push(await save(dir, AMD_COLLATERAL_FILES.crl, crlUrl, (await get(crlUrl)).body));
    return out;
  },
};

/** The fetchers `sigil collateral fetch` runs, in order. NVIDIA's (RIMs, OCSP) is added here when it exists. */
export const COLLATERAL_FETCHERS: CollateralFetcher[] = [INTEL_PCS_FETCHER, AMD_KDS_FETCHER];

/** Runs every fetcher that applies to the evidence, writing into `dir` (created if needed). */
export async function fetchCollateral(
  evidence: CollateralEvidence,
  dir: string,
  sources: CollateralSources = DEFAULT_COLLATERAL_SOURCES,
  fetchers: readonly CollateralFetcher[] = COLLATERAL_FETCHERS,
  get: HttpGet = httpGet,
): Promise<FetchedFile[]> {
  await mkdir(dir, { recursive: true });
  const out: FetchedFile[] = [];
  for (const fetcher of fetchers) out.push(...((await fetcher.fetch(evidence, dir, sources, get)) ?? []));
  return out;
}
