import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { AMD_COLLATERAL_FILES, type AmdCollateral } from './amd-collateral.ts';
import { COLLATERAL_FILES, type IntelCollateral } from './intel-collateral.ts';
import { EvidenceError } from '../errors.ts';
import { readNvidiaCollateralBundle, type NvidiaCollateralFiles } from './nvidia-collateral.ts';

const DCAP_QVL_FIELDS = [
  'tcb_info',
  'tcb_info_signature',
  'tcb_info_issuer_chain',
  'qe_identity',
  'qe_identity_signature',
  'pck_crl',
  'pck_crl_issuer_chain',
  'root_ca_crl',
] as const;

/**
 * dcap-qvl's (and Intel QVL's) collateral JSON: the signed TCB info and QE identity bodies as Intel's exact bytes with
 * their hex signatures apart, the CRLs as hex DER. They are put back into the shape Intel's PCS serves, so the signed
 * bytes are verified exactly as with a bundle directory.
 */
export function readDcapQvlCollateral(text: string): IntelCollateral {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new EvidenceError('ERR_COLLATERAL', 'not JSON (dcap-qvl collateral) and not a directory');
  }
  for (const field of DCAP_QVL_FIELDS) {
    if (typeof doc[field] !== 'string') throw new EvidenceError('ERR_COLLATERAL', `dcap-qvl collateral lacks ${field} (a string)`);
  }
  const f = doc as Record<(typeof DCAP_QVL_FIELDS)[number], string>;
  const der = (hex: string, field: string): Uint8Array => {
    if (!/^(?:[0-9a-fA-F]{2})+$/.test(hex)) throw new EvidenceError('ERR_COLLATERAL', `dcap-qvl collateral ${field} is not hex DER`);
    return new Uint8Array(Buffer.from(hex, 'hex'));
  };
  return {
    tcbInfo: `{"tcbInfo":${f.tcb_info},"signature":${JSON.stringify(f.tcb_info_signature)}}`,
    qeIdentity: `{"enclaveIdentity":${f.qe_identity},"signature":${JSON.stringify(f.qe_identity_signature)}}`,
    tcbSigningChain: f.tcb_info_issuer_chain,
    pckCrl: der(f.pck_crl, 'pck_crl'),
    pckCrlIssuerChain: f.pck_crl_issuer_chain,
    rootCrl: der(f.root_ca_crl, 'root_ca_crl'),
  };
}

/** A bundle file's bytes, or undefined when the bundle has no such file. */
async function readIfPresent(dir: string, name: string): Promise<Buffer | undefined> {
  try {
    return await readFile(join(dir, name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Reads the AMD files of a bundle directory (AMD_COLLATERAL_FILES); an absent file is left out. */
export async function readAmdCollateralBundle(dir: string): Promise<AmdCollateral> {
  const [vcek, certChain, crl] = await Promise.all([
    readIfPresent(dir, AMD_COLLATERAL_FILES.vcek),
    readIfPresent(dir, AMD_COLLATERAL_FILES.certChain),
    readIfPresent(dir, AMD_COLLATERAL_FILES.crl),
  ]);
  const out: AmdCollateral = {};
  if (vcek !== undefined) out.vcek = new Uint8Array(vcek);
  if (certChain !== undefined) out.certChain = certChain.toString('utf8');
  if (crl !== undefined) out.crl = new Uint8Array(crl);
  return out;
}

/**
 * Reads a collateral bundle directory (`--collateral DIR`), file names as in COLLATERAL_FILES, or one dcap-qvl
 * collateral JSON file. A file that is absent is left out, so the check needing it fails by name; a directory that
 * cannot be read throws.
 */
export async function readCollateralBundle(dir: string): Promise<IntelCollateral> {
  if (!(await stat(dir)).isDirectory()) return readDcapQvlCollateral(await readFile(dir, 'utf8'));
  const read = (name: string) => readIfPresent(dir, name);
  const out: IntelCollateral = {};
  const [tcbInfo, qeIdentity, tcbSigningChain, pckCrl, pckCrlIssuerChain, rootCrl] = await Promise.all(
    (['tcbInfo', 'qeIdentity', 'tcbSigningChain', 'pckCrl', 'pckCrlIssuerChain', 'rootCrl'] as const).map((k) => read(COLLATERAL_FILES[k])),
  );
  if (tcbInfo !== undefined) out.tcbInfo = tcbInfo.toString('utf8');
  if (qeIdentity !== undefined) out.qeIdentity = qeIdentity.toString('utf8');
  if (tcbSigningChain !== undefined) out.tcbSigningChain = tcbSigningChain.toString('utf8');
  if (pckCrl !== undefined) out.pckCrl = new Uint8Array(pckCrl);
  if (pckCrlIssuerChain !== undefined) out.pckCrlIssuerChain = pckCrlIssuerChain.toString('utf8');
  if (rootCrl !== undefined) out.rootCrl = new Uint8Array(rootCrl);
  return out;
}

/**
 * Everything a collateral bundle holds, for whichever evidence it meets (docs/auditing.md, section 3): Intel's for a
 * TDX quote, AMD's CRL for an SEV-SNP report, NVIDIA's RIMs and OCSP answers for GPU reports. `sigil verify
 * --collateral`, `sigil verify-evidence --collateral` and the attested client's `collateral` all read this.
 */
export interface CollateralBundle {
  intel: IntelCollateral;
  amd: AmdCollateral;
  /** Absent when the bundle has no nvidia-collateral.json. */
  nvidia?: NvidiaCollateralFiles;
}

/** Reads a bundle directory (or one dcap-qvl collateral JSON file, which holds Intel's part only). */
export async function readCollateralDirectory(path: string): Promise<CollateralBundle> {
  if (!(await stat(path)).isDirectory()) return { intel: readDcapQvlCollateral(await readFile(path, 'utf8')), amd: {} };
  const [intel, amd, nvidia] = await Promise.all([readCollateralBundle(path), readAmdCollateralBundle(path), readNvidiaCollateralBundle(path)]);
  return nvidia === undefined ? { intel, amd } : { intel, amd, nvidia };
}
