import { createHash } from 'node:crypto';
import { GpuEvidenceError } from './errors.ts';

/** The board a VBIOS RIM was made for, as NVIDIA's RIM service names it: NV_GPU_VBIOS_<project>_<SKU>_<chip>_<version>. */
export interface VbiosBoard {
  project: string;
  projectSku: string;
  chipSku: string;
  /** The VBIOS version without dots, e.g. 96009F0001. */
  version: string;
}

const VBIOS_ID = /^NV_GPU_VBIOS_([0-9A-F]{4})_([0-9A-F]{4})_([0-9A-F]{3,4})_([0-9A-F]{10})$/i;

export function vbiosBoard(id: string): VbiosBoard | null {
  const m = VBIOS_ID.exec(id);
  return m === null ? null : { project: m[1]!.toUpperCase(), projectSku: m[2]!.toUpperCase(), chipSku: m[3]!.toUpperCase(), version: m[4]!.toUpperCase() };
}

/**
 * A RIM as given: bare SWID XML, or NVIDIA's RIM service answer (`{id, rim: base64 XML, sha256}`), whose id names
 * the board. The id is the service's name for the file, not part of what NVIDIA signed: it chooses a RIM, and the
 * signed measurements inside must still match.
 */
export function readRimInput(text: string): { xml: string; id: string | null } {
  if (!text.trimStart().startsWith('{')) return { xml: text, id: null };
  let answer: { id?: unknown; rim?: unknown; sha256?: unknown };
  try {
    answer = JSON.parse(text) as typeof answer;
  } catch {
    throw new GpuEvidenceError('ERR_RIM_MALFORMED', 'the RIM looks like a RIM service answer but is not JSON');
  }
  if (typeof answer.id !== 'string' || typeof answer.rim !== 'string') {
    throw new GpuEvidenceError('ERR_RIM_MALFORMED', 'the RIM service answer lacks a string id or rim');
  }
  const xml = Buffer.from(answer.rim, 'base64');
  if (answer.sha256 !== undefined && (typeof answer.sha256 !== 'string' || createHash('sha256').update(xml).digest('hex') !== answer.sha256.toLowerCase())) {
    throw new GpuEvidenceError('ERR_RIM_MALFORMED', `the RIM service answer's sha256 ${String(answer.sha256).slice(0, 16)}... is not the SHA-256 of its RIM`);
  }
  return { xml: xml.toString('utf8'), id: answer.id };
}
