/**
 * NVIDIA's collateral for one GPU report in a bundle directory (docs/auditing.md, section 3): the driver and VBIOS
 * RIMs as NVIDIA's RIM service answers them, and the OCSP answers for the device chain and the RIM signing chains.
 * A manifest names the files one fetch wrote, so a bundle fetched again for other evidence never mixes in RIMs of an
 * earlier GPU, and the verifier reads the bundle without the user naming each file.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EvidenceError } from '../errors.ts';

export const NVIDIA_COLLATERAL_MANIFEST = 'nvidia-collateral.json';

/** What `nvidia-collateral.json` holds: each file with where it came from (the RIM's id, or the certificate an OCSP answer is about). */
export interface NvidiaCollateralManifest {
  rims: Array<{ id: string; file: string; url: string }>;
  ocsp: Array<{ about: string; file: string; url: string }>;
}

/** The NVIDIA files of a bundle, read: RIM texts (the service's JSON answers) and DER OCSP answers labelled with their file. */
export interface NvidiaCollateralFiles {
  rims: string[];
  ocsp: Array<{ label: string; der: Uint8Array }>;
}

/** A RIM id as NVIDIA's service spells them (NV_GPU_DRIVER_GH100_550.90.07): nothing that could leave the bundle directory. */
export const RIM_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export const nvidiaRimFile = (id: string): string => `nvidia-rim-${id}.json`;
export const nvidiaOcspFile = (n: number): string => `nvidia-ocsp-${String(n).padStart(2, '0')}.der`;

/** A file name the manifest gives: a plain name inside the bundle, never a path. */
const PLAIN_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

function manifestOf(text: string): NvidiaCollateralManifest {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new EvidenceError('ERR_COLLATERAL', `${NVIDIA_COLLATERAL_MANIFEST} is not JSON`);
  }
  const list = (key: 'rims' | 'ocsp'): Array<Record<string, unknown>> => {
    const value = (doc as Record<string, unknown> | null)?.[key];
    if (!Array.isArray(value)) throw new EvidenceError('ERR_COLLATERAL', `${NVIDIA_COLLATERAL_MANIFEST} lacks a "${key}" list`);
    for (const entry of value as unknown[]) {
      const file = (entry as Record<string, unknown> | null)?.file;
      if (typeof file !== 'string' || !PLAIN_NAME.test(file))
        throw new EvidenceError('ERR_COLLATERAL', `${NVIDIA_COLLATERAL_MANIFEST} names ${JSON.stringify(file)}, not a file name inside the bundle`);
    }
    return value as Array<Record<string, unknown>>;
  };
  return { rims: list('rims'), ocsp: list('ocsp') } as NvidiaCollateralManifest;
}

/**
 * Reads the NVIDIA part of a bundle directory; undefined when it has no manifest (the bundle holds no NVIDIA
 * collateral). A file the manifest names but the bundle lacks makes the bundle unreadable: the manifest promised it.
 */
export async function readNvidiaCollateralBundle(dir: string): Promise<NvidiaCollateralFiles | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, NVIDIA_COLLATERAL_MANIFEST), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw err;
  }
  const manifest = manifestOf(text);
  const read = async (file: string): Promise<Buffer> => {
    try {
      return await readFile(join(dir, file));
    } catch (err) {
      throw new EvidenceError(
        'ERR_COLLATERAL',
        `${NVIDIA_COLLATERAL_MANIFEST} names ${file}, which cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  };
  const rims = await Promise.all(manifest.rims.map(async (r) => (await read(r.file)).toString('utf8')));
  const ocsp = await Promise.all(manifest.ocsp.map(async (o) => ({ label: o.file, der: new Uint8Array(await read(o.file)) })));
  return { rims, ocsp };
}
