import type { X509Certificate } from 'node:crypto';
import { fail, notPinned, pass, type Check } from '../check.ts';
import type { TdxReferenceValues } from '../reference/reference-values.ts';
import { readPckExtension, type PckExtension } from './collateral/pck-extension.ts';
import { describeEvidenceError } from './errors.ts';

/**
 * Which machine made the quote, against the auditor's machine allow-list (`tdx.ppid`, `tdx.platform_instance_id`):
 * Intel writes the platform's PPID and platform instance id into the PCK certificate that signs the quoting
 * enclave, so with the chain checked (`tdx.pck_chain`) they name the machine. Mirrors SEV-SNP's `snp.instance`.
 */
export function tdxInstanceCheck(pck: X509Certificate | undefined, ref: TdxReferenceValues | undefined): Check {
  const pinned = ref?.ppid !== undefined || ref?.platform_instance_id !== undefined;
  let ext: PckExtension | undefined;
  let problem = 'no PCK certificate';
  try {
    if (pck !== undefined) ext = readPckExtension(pck);
  } catch (err) {
    problem = describeEvidenceError(err);
  }
  if (ext === undefined) {
    return pinned
      ? fail('tdx.instance', `not checked: ${problem}, so the machine cannot be compared with the allow-list`)
      : notPinned(
          'tdx.instance',
          `the machine was compared with nothing (${problem}), and no machine allow-list (tdx.ppid, tdx.platform_instance_id) is pinned`,
        );
  }
  const instance = ext.platformInstanceId ?? 'none';
  const names = `PPID ${ext.ppid} and platform instance id ${instance}`;
  if (!pinned) {
    return notPinned(
      'tdx.instance',
      `${names} (from Intel's PCK certificate) were compared with nothing: no machine allow-list (tdx.ppid, tdx.platform_instance_id) is pinned, so any Intel TDX machine passes`,
    );
  }
  const wrong: string[] = [];
  if (ref?.ppid !== undefined && !ref.ppid.includes(ext.ppid)) wrong.push(`PPID ${ext.ppid} is not one of the ${ref.ppid.length} allowed machine(s)`);
  if (ref?.platform_instance_id !== undefined && (ext.platformInstanceId === undefined || !ref.platform_instance_id.includes(ext.platformInstanceId))) {
    wrong.push(`platform instance id ${instance} is not one of the ${ref.platform_instance_id.length} allowed platform(s)`);
  }
  return wrong.length === 0
    ? pass('tdx.instance', `${names} (from Intel's PCK certificate) are on the allow-list: this is one of the machines the auditor named`)
    : fail('tdx.instance', `${wrong.join('; ')}: the quote comes from another machine`);
}
