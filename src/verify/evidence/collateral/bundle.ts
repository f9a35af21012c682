import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { COLLATERAL_FILES, type IntelCollateral } from './intel-collateral.ts';

/**
 * Reads a collateral bundle directory (`--collateral DIR`), file names as in COLLATERAL_FILES. A file that is absent
 * is left out, so the check needing it fails by name; a directory that cannot be read throws.
 */
export async function readCollateralBundle(dir: string): Promise<IntelCollateral> {
  if (!(await stat(dir)).isDirectory()) throw new Error(`${dir} is not a directory`);
  const read = async (name: string): Promise<Buffer | undefined> => {
    try {
      return await readFile(join(dir, name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  };
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
