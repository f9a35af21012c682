import { MeasureError } from './errors.ts';

/** Below this much guest memory QEMU's q35 keeps it all under 4 GiB; from it on, 2 GiB stay below. */
const SPLIT_LOWMEM_FROM = 0xb000_0000;
const TWO_GIB = 0x8000_0000;
/** The ACPI data QEMU reserves at the top of low memory by default (its acpi_data_size). */
export const DEFAULT_ACPI_DATA_SIZE = 0x28000;
const XLF_CAN_BE_LOADED_ABOVE_4G = 1 << 1;

export interface QemuBootShape {
  initrdSize: number;
  memorySize: number;
  acpiDataSize: number;
}

/**
 * The kernel as QEMU hands it to the firmware for direct boot: QEMU fills in the Linux boot protocol's
 * setup header (loader type, heap end, command-line address, initrd address and size) before OVMF
 * loads it, so those bytes are part of what OVMF measures.
 */
export function qemuPatchedKernel(kernel: Uint8Array, shape: QemuBootShape): Buffer {
  if (kernel.length < 0x1000) throw new MeasureError('ERR_MEASURE_INPUT', `the kernel is ${kernel.length} bytes, too short for a Linux boot image`);
  const k = Buffer.from(kernel);
  // QEMU reads the boot protocol version only behind the "HdrS" magic; without it the image is patched as protocol 0.
  const protocol = k.readUInt32LE(0x202) === 0x53726448 ? k.readUInt16LE(0x206) : 0;
  const loadHigh = protocol >= 0x200 && (k[0x211]! & 0x01) !== 0;
  const [realAddr, cmdlineAddr] = loadHigh ? [0x10000, 0x20000] : [0x90000, 0x9a000];
  if (protocol >= 0x200) k[0x210] = 0xb0; // type_of_loader: QEMU
  if (protocol >= 0x201) {
    k[0x211] = k[0x211]! | 0x80; // CAN_USE_HEAP
    k.writeUInt32LE(cmdlineAddr - realAddr - 0x200, 0x224); // heap_end_ptr (and the pad after it)
  }
  if (protocol >= 0x202) k.writeUInt32LE(cmdlineAddr, 0x228);
  else {
    k.writeUInt16LE(0xa33f, 0x20);
    k.writeUInt16LE(cmdlineAddr - realAddr, 0x22);
  }
  if (shape.initrdSize > 0) {
    if (protocol < 0x200) throw new MeasureError('ERR_MEASURE_INPUT', "the kernel's boot protocol is too old to take an initrd");
    // As QEMU's x86_load_linux: anywhere below 4 GiB with XLF_CAN_BE_LOADED_ABOVE_4G, else the kernel's initrd_addr_max.
    let initrdMax = 0x37ffffff;
    if (protocol >= 0x20c && (k.readUInt16LE(0x236) & XLF_CAN_BE_LOADED_ABOVE_4G) !== 0) initrdMax = 0xffffffff;
    else if (protocol >= 0x203) initrdMax = k.readUInt32LE(0x22c);
    const lowmem = shape.memorySize < SPLIT_LOWMEM_FROM ? SPLIT_LOWMEM_FROM : TWO_GIB;
    const below4g = shape.memorySize >= lowmem ? lowmem : shape.memorySize;
    if (shape.acpiDataSize > below4g) throw new MeasureError('ERR_MEASURE_INPUT', 'the ACPI data is larger than the memory below 4 GiB');
    if (initrdMax >= below4g - shape.acpiDataSize) initrdMax = below4g - shape.acpiDataSize - 1;
    if (shape.initrdSize >= initrdMax) throw new MeasureError('ERR_MEASURE_INPUT', 'the initrd does not fit in the memory below 4 GiB');
    k.writeUInt32LE(((initrdMax - shape.initrdSize) & ~4095) >>> 0, 0x218);
    k.writeUInt32LE(shape.initrdSize, 0x21c);
  }
  return k;
}
