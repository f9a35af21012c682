import { GpuEvidenceError } from './errors.ts';

/**
 * The NVIDIA fields of an SPDM MEASUREMENTS response's opaque data: a list of (type u16 LE, size u16 LE, value).
 * Type numbers as NVIDIA's local verifier (nvtrust, OpaqueDataType) names them; unknown types are kept by number.
 */
export const OPAQUE_FIELD_NAMES: Readonly<Record<number, string>> = {
  1: 'cert_issuer_name',
  2: 'cert_authority_key_identifier',
  3: 'driver_version',
  4: 'gpu_info',
  5: 'sku',
  6: 'vbios_version',
  7: 'manufacturer_id',
  8: 'tamper_detection',
  9: 'smc',
  10: 'vpr',
  11: 'nvdec0_status',
  12: 'msrscnt',
  13: 'cprinfo',
  14: 'board_id',
  15: 'chip_sku',
  16: 'chip_sku_mod',
  17: 'project',
  18: 'project_sku',
  19: 'project_sku_mod',
  20: 'fwid',
  21: 'protected_pcie_status',
  22: 'switch_pdi',
  23: 'floorswept_ports',
  24: 'position_id',
  25: 'lock_switch_status',
  32: 'gpu_link_conn',
  33: 'sys_enable_status',
  34: 'opaque_data_version',
  35: 'chip_info',
  36: 'feature_flag',
};

export const OPAQUE_DRIVER_VERSION = 3;
export const OPAQUE_VBIOS_VERSION = 6;
export const OPAQUE_CHIP_SKU = 15;
export const OPAQUE_PROJECT = 17;
export const OPAQUE_PROJECT_SKU = 18;
export const OPAQUE_FWID = 20;

export interface OpaqueField {
  type: number;
  /** The name NVIDIA gives the type, or `type_<n>`. */
  name: string;
  value: Uint8Array;
}

/** What the opaque data says about the GPU's firmware, in the form NVIDIA's RIMs use. */
export interface GpuFirmwareInfo {
  /** e.g. "550.90.07"; null when the report carries none. */
  driverVersion: string | null;
  /** e.g. "96.00.9F.00.01"; null when the report carries none. */
  vbiosVersion: string | null;
  /** Project, project SKU and chip SKU, which name the VBIOS RIM (e.g. 1010, 0200, 882); null when absent. */
  project: string | null;
  projectSku: string | null;
  chipSku: string | null;
  /** The 48-byte firmware identity (hash) the device certificate must carry; null when absent. */
  fwid: Uint8Array | null;
}

export function readOpaqueFields(bytes: Uint8Array): OpaqueField[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fields: OpaqueField[] = [];
  let offset = 0;
  while (offset < bytes.length) {
    if (offset + 4 > bytes.length) {
      throw new GpuEvidenceError('ERR_SPDM_MALFORMED', `the opaque data ends inside a field header at byte ${offset} of ${bytes.length}`);
    }
    const type = view.getUint16(offset, true);
    const size = view.getUint16(offset + 2, true);
    if (offset + 4 + size > bytes.length) {
      throw new GpuEvidenceError('ERR_SPDM_MALFORMED', `opaque field type ${type} claims ${size} bytes but only ${bytes.length - offset - 4} remain`);
    }
    fields.push({ type, name: OPAQUE_FIELD_NAMES[type] ?? `type_${type}`, value: bytes.slice(offset + 4, offset + 4 + size) });
    offset += 4 + size;
  }
  return fields;
}

/** A NUL-terminated ASCII string field ("550.90.07\0"). */
function asciiField(value: Uint8Array): string {
  const end = value.indexOf(0);
  return Buffer.from(value.subarray(0, end === -1 ? value.length : end)).toString('latin1');
}

/**
 * The VBIOS version as NVIDIA writes it in RIMs: the first 4 bytes as a little-endian number in hex, split in
 * pairs, then the fifth byte ("00 9f 00 96 01 ..." is 96.00.9F.00.01).
 */
export function formatVbiosVersion(value: Uint8Array): string {
  if (value.length < 5) throw new GpuEvidenceError('ERR_SPDM_MALFORMED', `the VBIOS version field has ${value.length} bytes, fewer than 5`);
  const major = new DataView(value.buffer, value.byteOffset, 4).getUint32(0, true).toString(16).padStart(8, '0');
  const minor = value[4]!.toString(16).padStart(2, '0');
  return `${major.match(/../g)!.join('.')}.${minor}`.toUpperCase();
}

export function firmwareInfo(fields: OpaqueField[]): GpuFirmwareInfo {
  const one = (type: number): Uint8Array | null => {
    const found = fields.filter((f) => f.type === type);
    if (found.length > 1) throw new GpuEvidenceError('ERR_SPDM_MALFORMED', `the opaque data holds ${found.length} ${OPAQUE_FIELD_NAMES[type]} fields`);
    return found[0]?.value ?? null;
  };
  const text = (type: number): string | null => {
    const v = one(type);
    return v === null ? null : asciiField(v);
  };
  const vbios = one(OPAQUE_VBIOS_VERSION);
  return {
    driverVersion: text(OPAQUE_DRIVER_VERSION),
    vbiosVersion: vbios === null ? null : formatVbiosVersion(vbios),
    project: text(OPAQUE_PROJECT),
    projectSku: text(OPAQUE_PROJECT_SKU),
    chipSku: text(OPAQUE_CHIP_SKU),
    fwid: one(OPAQUE_FWID),
  };
}
