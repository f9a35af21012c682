/**
 * A key the AMD SEV-SNP firmware derives for this guest: MSG_KEY_REQ through the Linux guest driver's
 * SNP_GET_DERIVED_KEY ioctl on /dev/sev-guest. The firmware mixes a root key only the chip holds (VCEK, or the VM's
 * VMRK) with the launch values the request selects, so the same key comes back on every start of a guest with the same
 * values on the same chip, and no other guest, nor the host, can ask for it.
 *
 * Node has no ioctl, so open/ioctl/close go through koffi against libc, as NVML does. Structure layouts and the ioctl
 * number as in the kernel's include/uapi/linux/sev-guest.h; the response as AMD's SEV-SNP firmware ABI lays out
 * MSG_KEY_RSP (status at 0, the 32-byte key at 0x20).
 */
import { loadKoffi } from './artifact.ts';
import { SigilError } from '../protocol/sigil-error.ts';

export const DEFAULT_LIBC = 'libc.so.6';

/** The launch values a derived key can be bound to (MSG_KEY_REQ GUEST_FIELD_SELECT, bits 0-3). */
export type SealingField = 'policy' | 'image_id' | 'family_id' | 'measurement';
const FIELD_BITS: Record<SealingField, bigint> = { policy: 1n, image_id: 2n, family_id: 4n, measurement: 8n };

export type SealingRootKey = 'vcek' | 'vmrk';
const ROOT_KEY_SELECT: Record<SealingRootKey, number> = { vcek: 0, vmrk: 1 };

export interface DerivedKeyRequest {
  rootKey: SealingRootKey;
  fields: readonly SealingField[];
}

/** _IOWR('S', 0x1, struct snp_guest_request_ioctl): read-write, 32-byte argument, type 'S', number 1. */
const SNP_GET_DERIVED_KEY = ((3 << 30) | (32 << 16) | (0x53 << 8) | 0x1) >>> 0;
const O_RDWR = 2;
const REQUEST_BYTES = 32;
const RESPONSE_BYTES = 64;
const KEY_OFFSET = 0x20;
const KEY_BYTES = 32;

export class SevGuestKeyError extends SigilError<'ERR_SEV_GUEST_KEY'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_SEV_GUEST_KEY', message, options);
  }
}

/** The GUEST_FIELD_SELECT bits for `fields`. */
export function guestFieldSelect(fields: readonly SealingField[]): bigint {
  return fields.reduce((bits, field) => bits | FIELD_BITS[field], 0n);
}

/**
 * Asks the firmware, through `device`, for the 32-byte key `request` describes. `library` is the C library whose
 * open/ioctl/close reach the device (the system's libc; tests pass a stand-in).
 */
export function deriveSevGuestKey(device: string, request: DerivedKeyRequest, library: string = DEFAULT_LIBC): Buffer {
  const koffi = loadKoffi();
  const lib = koffi.load(library);
  const open = lib.func('int open(const char *path, int flags, ...)');
  const ioctl = lib.func('int ioctl(int fd, unsigned long request, ...)');
  const close = lib.func('int close(int fd)');
  const errno = () => {
    const code = koffi.errno();
    return `errno ${code}${ERRNO_NAMES[code] === undefined ? '' : ` (${ERRNO_NAMES[code]})`}`;
  };

  const fd = open(device, O_RDWR) as number;
  if (fd < 0) throw new SevGuestKeyError(`cannot open ${device}: ${errno()}; is this an SEV-SNP guest with the sev-guest driver loaded?`);
  const req = koffi.alloc('uint8_t', REQUEST_BYTES);
  const resp = koffi.alloc('uint8_t', RESPONSE_BYTES);
  try {
    const reqBytes = Buffer.alloc(REQUEST_BYTES);
    reqBytes.writeUInt32LE(ROOT_KEY_SELECT[request.rootKey], 0);
    reqBytes.writeBigUInt64LE(guestFieldSelect(request.fields), 8);
    // vmpl 0, guest_svn 0, tcb_version 0: the key is not bound to an SVN or TCB, so a firmware update keeps it.
    koffi.encode(req, 'uint8_t', Array.from(reqBytes), REQUEST_BYTES);
    koffi.encode(resp, 'uint8_t', new Array<number>(RESPONSE_BYTES).fill(0), RESPONSE_BYTES);
    const arg = Buffer.alloc(32);
    arg.writeUInt8(1, 0);
    arg.writeBigUInt64LE(koffi.address(req) as bigint, 8);
    arg.writeBigUInt64LE(koffi.address(resp) as bigint, 16);
    if ((ioctl(fd, SNP_GET_DERIVED_KEY, 'void *', arg) as number) < 0) {
      throw new SevGuestKeyError(
        `SNP_GET_DERIVED_KEY on ${device} failed: ${errno()}, firmware error 0x${arg.readUInt32LE(24).toString(16)}, VMM error 0x${arg.readUInt32LE(28).toString(16)}`,
      );
    }
    const answer = Buffer.from(koffi.view(resp, RESPONSE_BYTES) as ArrayBuffer).subarray(0, RESPONSE_BYTES);
    const status = answer.readUInt32LE(0);
    if (status !== 0)
      throw new SevGuestKeyError(
        `the SEV-SNP firmware refused the key request on ${device}: status 0x${status.toString(16)}${FIRMWARE_STATUS[status] === undefined ? '' : ` (${FIRMWARE_STATUS[status]})`}`,
      );
    return Buffer.from(answer.subarray(KEY_OFFSET, KEY_OFFSET + KEY_BYTES));
  } finally {
    koffi.free(req);
    koffi.free(resp);
    close(fd);
  }
}

const ERRNO_NAMES: Readonly<Record<number, string>> = { 1: 'EPERM', 2: 'ENOENT', 5: 'EIO', 13: 'EACCES', 19: 'ENODEV', 22: 'EINVAL', 25: 'ENOTTY' };
/** MSG_KEY_RSP STATUS values (SEV-SNP firmware ABI). */
const FIRMWARE_STATUS: Readonly<Record<number, string>> = { 0x16: 'INVALID_PARAM', 0x27: 'INVALID_KEY' };
