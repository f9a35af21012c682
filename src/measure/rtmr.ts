import { createHash } from 'node:crypto';
import { guidBytes } from './guid.ts';

export const ZERO_RTMR = Buffer.alloc(48);
export const EFI_GLOBAL_VARIABLE = '8be4df61-93ca-11d2-aa0d-00e098032b8c';
export const EFI_IMAGE_SECURITY_DATABASE = 'd719b2cb-3d3a-4596-a3bc-dad00e67656f';

export function sha384(data: Uint8Array): Buffer {
  return createHash('sha384').update(data).digest();
}

/** A register's value after extending each digest in turn: RTMR = SHA-384(RTMR || digest), from 48 zero bytes. */
export function rtmrFromDigests(digests: readonly Uint8Array[]): Buffer {
  let value: Buffer = ZERO_RTMR;
  for (const digest of digests) value = sha384(Buffer.concat([value, digest]));
  return value;
}

/** UEFI_VARIABLE_DATA (TCG PC Client spec) for a variable, as measured for EV_EFI_VARIABLE_DRIVER_CONFIG. */
export function efiVariableData(vendorGuid: string, name: string, data: Uint8Array = new Uint8Array()): Buffer {
  const header = Buffer.alloc(32);
  guidBytes(vendorGuid).copy(header, 0);
  header.writeBigUInt64LE(BigInt(name.length), 16);
  header.writeBigUInt64LE(BigInt(data.length), 24);
  return Buffer.concat([header, Buffer.from(name, 'utf16le'), data]);
}

/** The separator OVMF measures between the firmware's and the boot loader's events. */
export const SEPARATOR_DIGEST = sha384(Buffer.alloc(4));

/** EV_EFI_ACTION events measure their ASCII text. */
export function actionDigest(text: string): Buffer {
  return sha384(Buffer.from(text, 'latin1'));
}

/** The kernel command line as OVMF measures it into RTMR2: UTF-16LE with its terminating NUL. */
export function tdxCmdlineDigest(cmdline: string): Buffer {
  return sha384(Buffer.concat([Buffer.from(cmdline, 'utf16le'), Buffer.alloc(2)]));
}
