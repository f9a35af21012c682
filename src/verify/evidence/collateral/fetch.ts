import type { X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { toHex } from '../byte-reader.ts';
import { readPemCertificates } from '../certificate-chain.ts';
import { readSnpReport } from '../snp-report.ts';
import { snpProductLine } from '../snp-guest-checks.ts';
import { reportCpuFamily, tcbParts } from '../snp-policy.ts';
import { readTdxQuote } from '../tdx-quote.ts';
import { AMD_COLLATERAL_FILES } from './amd-collateral.ts';
import { COLLATERAL_FILES } from './intel-collateral.ts';
import { readPckExtension } from './pck-extension.ts';
import { CollateralAnswerError, CollateralFetchError } from './fetch-error.ts';
import { boundedFetch, fetchLimits, type FetchLimits } from './bounded-fetch.ts';
import { expectCertificate, expectCrl, expectPemChain, expectSignedJson } from './answer-shape.ts';
import { NVIDIA_COLLATERAL_MANIFEST, nvidiaOcspFile, nvidiaRimFile, RIM_ID, type NvidiaCollateralManifest } from './nvidia-collateral.ts';
import { fetchNvidiaCollateral, NVIDIA_OCSP_SERVICE, NVIDIA_RIM_SERVICE, rimIdsForReport } from '../../gpu/collateral-fetch.ts';
import { readDeviceCertificates } from '../../gpu/device-certificates.ts';
import { describeGpuEvidenceError } from '../../gpu/errors.ts';
import { rimSigningChain } from '../../gpu/rim.ts';
import { readSpdmMeasurementReport, type SpdmMeasurementReport } from '../../gpu/spdm-measurements.ts';

export { CollateralAnswerError, CollateralFetchError };

/** Where collateral comes from. The defaults are the vendors' real services; tests and mirrors give their own. */
export interface CollateralSources {
  /** Intel PCS, e.g. https://api.trustedservices.intel.com (…/tdx/certification/v4/tcb, /qe/identity; …/sgx/certification/v4/pckcrl). */
  intelPcs: string;
  /** The Intel SGX Root CA's CRL. */
  intelRootCrl: string;
  /** AMD KDS, e.g. https://kdsintf.amd.com (…/vcek/v1/{product}/…, …/vlek/v1/{product}/…). */
  amdKds: string;
  /** NVIDIA's RIM service; RIMs are read from <base>/v1/rim/<id>. */
  nvidiaRimService: string;
  /** NVIDIA's OCSP responder (RFC 6960, POST). */
  nvidiaOcsp: string;
}

export const DEFAULT_COLLATERAL_SOURCES: CollateralSources = {
  intelPcs: 'https://api.trustedservices.intel.com',
  intelRootCrl: 'https://certificates.trustedservices.intel.com/IntelSGXRootCA.der',
  amdKds: 'https://kdsintf.amd.com',
  nvidiaRimService: NVIDIA_RIM_SERVICE,
  nvidiaOcsp: NVIDIA_OCSP_SERVICE,
};

/**
 * The evidence collateral is fetched for: a TDX quote or an SEV-SNP report (raw bytes), and for SNP the product line
 * when the report names none; an NVIDIA GPU's SPDM report (raw bytes) with its device certificate chain (PEM).
 */
export interface CollateralEvidence {
  tdxQuote?: Uint8Array;
  snpReport?: Uint8Array;
  amdProduct?: string;
  gpuReport?: Uint8Array;
  gpuCertificates?: string;
}

/** One file a fetcher wrote into the bundle, with the URL it came from (none for a manifest the fetcher wrote itself). */
export interface FetchedFile {
  file: string;
  url?: string;
  bytes: number;
}

/**
 * A collateral fetcher: looks at the evidence and, when it applies, fetches what the verifier needs into `dir`.
 * Returns null when the evidence is not its kind. COLLATERAL_FETCHERS lists them.
 */
export interface CollateralFetcher {
  name: string;
  fetch(evidence: CollateralEvidence, dir: string, sources: CollateralSources, get: HttpGet, limits: FetchLimits): Promise<FetchedFile[] | null>;
}

export interface HttpResponse {
  body: Uint8Array;
  header(name: string): string | undefined;
}
/** GET `url` for the bundle's `file`, under the fetch's limits; a non-2xx answer throws, naming the file, the URL and the status. */
export type HttpGet = (file: string, url: string) => Promise<HttpResponse>;

function boundedGet(limits: FetchLimits): HttpGet {
  return async (file, url) => {
    const response = await boundedFetch(file, url, {}, limits);
    return { body: response.body, header: (name) => response.headers.get(name) ?? undefined };
  };
}

const trimSlash = (url: string) => url.replace(/\/+$/, '');

async function save(dir: string, file: string, url: string | undefined, content: Uint8Array | string): Promise<FetchedFile> {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  await writeFile(join(dir, file), bytes);
  return { file, ...(url === undefined ? {} : { url }), bytes: bytes.length };
}

/** Intel PCS's issuer-chain headers are URL-encoded PEM. */
function issuerChain(response: HttpResponse, header: string, file: string, url: string): string {
  const value = response.header(header);
  if (value === undefined) throw new CollateralAnswerError(`${file}: ${url} sent no ${header} header`);
  let chain: string;
  try {
    chain = decodeURIComponent(value);
  } catch {
    throw new CollateralAnswerError(`${file}: ${url} sent a ${header} header that is not URL-encoded PEM`);
  }
  return expectPemChain(chain, file, url);
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
    const tcb = await get(COLLATERAL_FILES.tcbInfo, tcbUrl);
    out.push(await save(dir, COLLATERAL_FILES.tcbInfo, tcbUrl, expectSignedJson(tcb.body, 'tcbInfo', COLLATERAL_FILES.tcbInfo, tcbUrl)));
    out.push(await save(dir, COLLATERAL_FILES.tcbSigningChain, tcbUrl, issuerChain(tcb, 'TCB-Info-Issuer-Chain', COLLATERAL_FILES.tcbSigningChain, tcbUrl)));
    const qeUrl = `${pcs}/tdx/certification/v4/qe/identity`;
    const qe = await get(COLLATERAL_FILES.qeIdentity, qeUrl);
    out.push(await save(dir, COLLATERAL_FILES.qeIdentity, qeUrl, expectSignedJson(qe.body, 'enclaveIdentity', COLLATERAL_FILES.qeIdentity, qeUrl)));
    const crlUrl = `${pcs}/sgx/certification/v4/pckcrl?ca=${ca}&encoding=der`;
    const crl = await get(COLLATERAL_FILES.pckCrl, crlUrl);
    out.push(await save(dir, COLLATERAL_FILES.pckCrl, crlUrl, expectCrl(crl.body, COLLATERAL_FILES.pckCrl, crlUrl)));
    out.push(
      await save(dir, COLLATERAL_FILES.pckCrlIssuerChain, crlUrl, issuerChain(crl, 'SGX-PCK-CRL-Issuer-Chain', COLLATERAL_FILES.pckCrlIssuerChain, crlUrl)),
    );
    const rootCrl = await get(COLLATERAL_FILES.rootCrl, sources.intelRootCrl);
    out.push(await save(dir, COLLATERAL_FILES.rootCrl, sources.intelRootCrl, expectCrl(rootCrl.body, COLLATERAL_FILES.rootCrl, sources.intelRootCrl)));
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
    if (report.signingKey === 'vcek' && report.chipId.every((b) => b === 0))
      throw new CollateralFetchError(
        "the report's CHIP_ID is all zeros (the host masked it), and AMD's KDS finds a VCEK by CHIP_ID: take the VCEK from the evidence's certificate table instead",
      );
    if (report.signingKey === 'vcek') {
      const vcekUrl = `${base}/${vcekPath(product, report.chipId, report.reportedTcb.raw, family)}`;
      const vcek = await get(AMD_COLLATERAL_FILES.vcek, vcekUrl);
      out.push(await save(dir, AMD_COLLATERAL_FILES.vcek, vcekUrl, expectCertificate(vcek.body, AMD_COLLATERAL_FILES.vcek, vcekUrl)));
    }
    const chainUrl = `${base}/cert_chain`;
    const chain = Buffer.from((await get(AMD_COLLATERAL_FILES.certChain, chainUrl)).body).toString('utf8');
    out.push(await save(dir, AMD_COLLATERAL_FILES.certChain, chainUrl, expectPemChain(chain, AMD_COLLATERAL_FILES.certChain, chainUrl)));
    const crlUrl = `${base}/crl`;
    const crl = await get(AMD_COLLATERAL_FILES.crl, crlUrl);
    out.push(await save(dir, AMD_COLLATERAL_FILES.crl, crlUrl, expectCrl(crl.body, AMD_COLLATERAL_FILES.crl, crlUrl)));
    return out;
  },
};

/** The GPU report and device chain, read; what cannot be read is the fetch's error, not a verdict. */
function gpuEvidence(evidence: CollateralEvidence): { report: SpdmMeasurementReport; device: X509Certificate[] } {
  try {
    return { report: readSpdmMeasurementReport(evidence.gpuReport!), device: readDeviceCertificates(evidence.gpuCertificates ?? '') };
  } catch (err) {
    throw new CollateralFetchError(`the GPU evidence cannot be read: ${describeGpuEvidenceError(err)}`);
  }
}

/**
 * NVIDIA: the driver and VBIOS RIMs the report's firmware names (driver by version; VBIOS by project, project SKU,
 * chip SKU and version, as NVIDIA's verifier chooses them), then an OCSP answer for every certificate of the device
 * chain above the GPU's own (which its firmware issues, so NVIDIA's responder does not know it) and of each RIM's
 * signing chain, below the roots. The manifest names what this fetch wrote.
 */
export const NVIDIA_FETCHER: CollateralFetcher = {
  name: 'nvidia',
  async fetch(evidence, dir, sources, _get, limits) {
    if (evidence.gpuReport === undefined) return null;
    const { report, device } = gpuEvidence(evidence);
    const ids = rimIdsForReport(report);
    const f = report.firmware;
    if (f.driverVersion === null) throw new CollateralFetchError('the GPU report states no driver version, so no driver RIM can be chosen for it');
    if (ids.length < 2)
      throw new CollateralFetchError(
        `the GPU report does not state its VBIOS version, project, project SKU and chip SKU (VBIOS ${f.vbiosVersion ?? '?'}, project ${f.project ?? '?'}, project SKU ${f.projectSku ?? '?'}, chip SKU ${f.chipSku ?? '?'}), so no VBIOS RIM can be chosen for it`,
      );
    const bad = ids.find((id) => !RIM_ID.test(id));
    if (bad !== undefined) throw new CollateralFetchError(`the GPU report's firmware names the RIM ${JSON.stringify(bad)}, which is not a RIM id`);
    const options = { rimServiceUrl: sources.nvidiaRimService, ocspUrl: sources.nvidiaOcsp, limits };
    const { rims } = await fetchNvidiaCollateral({ rimIds: ids, chains: [] }, options);
    const rimChains = rims.map(({ id, text }) => {
      try {
        return rimSigningChain(text);
      } catch (err) {
        throw new CollateralFetchError(
          `RIM ${id}: its signature carries no readable certificate chain to ask NVIDIA's OCSP responder about: ${describeGpuEvidenceError(err)}`,
        );
      }
    });
    const { ocsp } = await fetchNvidiaCollateral({ rimIds: [], chains: [device.slice(1), ...rimChains] }, options);
    const rimBase = trimSlash(sources.nvidiaRimService);
    const manifest: NvidiaCollateralManifest = { rims: [], ocsp: [] };
    const out: FetchedFile[] = [];
    for (const { id, text } of rims) {
      const url = `${rimBase}/v1/rim/${encodeURIComponent(id)}`;
      out.push(await save(dir, nvidiaRimFile(id), url, text));
      manifest.rims.push({ id, file: nvidiaRimFile(id), url });
    }
    for (const [n, { label, der }] of ocsp.entries()) {
      out.push(await save(dir, nvidiaOcspFile(n + 1), sources.nvidiaOcsp, der));
      manifest.ocsp.push({ about: label, file: nvidiaOcspFile(n + 1), url: sources.nvidiaOcsp });
    }
    out.push(await save(dir, NVIDIA_COLLATERAL_MANIFEST, undefined, `${JSON.stringify(manifest, null, 2)}\n`));
    return out;
  },
};

/** The fetchers `sigil collateral fetch` runs, in order. */
export const COLLATERAL_FETCHERS: CollateralFetcher[] = [INTEL_PCS_FETCHER, AMD_KDS_FETCHER, NVIDIA_FETCHER];

/** What `fetchCollateral` allows the services: bytes per file, seconds for the whole fetch (docs/auditing.md, section 3). */
export interface CollateralFetchOptions {
  maxFileBytes?: number;
  deadlineSeconds?: number;
  fetchers?: readonly CollateralFetcher[];
}

/**
 * Runs every fetcher that applies to the evidence into a new directory beside `dir`, then moves what it fetched into
 * `dir` (created if needed; files of the same name are replaced) only once every fetcher succeeded: a failed fetch
 * leaves `dir` as it was and nothing beside it.
 */
export async function fetchCollateral(
  evidence: CollateralEvidence,
  dir: string,
  sources: CollateralSources = DEFAULT_COLLATERAL_SOURCES,
  options: CollateralFetchOptions = {},
): Promise<FetchedFile[]> {
  const limits = fetchLimits(options.maxFileBytes, options.deadlineSeconds);
  const get = boundedGet(limits);
  await mkdir(dirname(dir), { recursive: true });
  const staging = await mkdtemp(join(dirname(dir), `.${basename(dir)}.partial-`));
  try {
    const out: FetchedFile[] = [];
    for (const fetcher of options.fetchers ?? COLLATERAL_FETCHERS) out.push(...((await fetcher.fetch(evidence, staging, sources, get, limits)) ?? []));
    const exists = await stat(dir).then(
      () => true,
      () => false,
    );
    if (!exists) await rename(staging, dir);
    else for (const file of await readdir(staging)) await rename(join(staging, file), join(dir, file));
    return out;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}
