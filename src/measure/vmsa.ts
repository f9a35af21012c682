import { MeasureError } from './errors.ts';
/** The hypervisors whose initial vCPU state is modelled; each sets a few VMSA fields its own way. */
export const VMM_TYPES = ['qemu', 'ec2', 'gce'] as const;
export type VmmType = (typeof VMM_TYPES)[number];

/** The reset vector every boot processor starts at. */
export const BSP_EIP = 0xffff_fff0;

interface Segment {
  selector: number;
  attrib: number;
  limit: number;
  base: number;
}

interface SaveArea {
  es: Segment;
  cs: Segment;
  ss: Segment;
  ds: Segment;
  fs: Segment;
  gs: Segment;
  gdtr: Segment;
  ldtr: Segment;
  idtr: Segment;
  tr: Segment;
  cr0: number;
  rip: number;
  gPat: bigint;
  rdx: number;
  sevFeatures: bigint;
  mxcsr: number;
  fcw: number;
}

const SEGMENT_OFFSETS = { es: 0x00, cs: 0x10, ss: 0x20, ds: 0x30, fs: 0x40, gs: 0x50, gdtr: 0x60, ldtr: 0x70, idtr: 0x80, tr: 0x90 } as const;
const DEFAULT_G_PAT = 0x0007_0406_0007_0406n;

function seg(selector: number, attrib: number, limit: number, base = 0): Segment {
  return { selector, attrib, limit, base };
}

/** Lays a save area out as the 4 KiB VMSA page (AMD APM vol. 2, table B-4); every other byte is zero. */
function encode(area: SaveArea): Buffer {
  const page = Buffer.alloc(4096);
  for (const [name, offset] of Object.entries(SEGMENT_OFFSETS)) {
    const s = area[name as keyof typeof SEGMENT_OFFSETS];
    page.writeUInt16LE(s.selector, offset);
    page.writeUInt16LE(s.attrib, offset + 2);
    page.writeUInt32LE(s.limit, offset + 4);
    page.writeBigUInt64LE(BigInt(s.base), offset + 8);
  }
  page.writeBigUInt64LE(0x1000n, 0xd0); // EFER.SVME, which KVM sets
  page.writeBigUInt64LE(0x40n, 0x148); // CR4.MCE, which KVM sets
  page.writeBigUInt64LE(BigInt(area.cr0), 0x158);
  page.writeBigUInt64LE(0x400n, 0x160); // DR7
  page.writeBigUInt64LE(0xffff0ff0n, 0x168); // DR6
  page.writeBigUInt64LE(0x2n, 0x170); // RFLAGS
  page.writeBigUInt64LE(BigInt(area.rip), 0x178);
  page.writeBigUInt64LE(area.gPat, 0x268);
  page.writeBigUInt64LE(BigInt(area.rdx), 0x310);
  page.writeBigUInt64LE(area.sevFeatures, 0x3b0);
  page.writeBigUInt64LE(0x1n, 0x3e8); // XCR0
  page.writeUInt32LE(area.mxcsr, 0x408);
  page.writeUInt16LE(area.fcw, 0x410);
  return page;
}

/** The real-mode reset state of a vCPU starting at `eip`, as the given hypervisor creates it. */
export function resetVmsa(eip: number, sevFeatures: bigint, vcpuSig: number, vmm: VmmType): Buffer {
  let cs = 0x9b,
    ss = 0x93,
    tr = 0x8b,
    rdx = vcpuSig,
    mxcsr = 0x1f80,
    fcw = 0x37f,
    gPat = DEFAULT_G_PAT;
  if (vmm === 'ec2') {
    cs = eip === BSP_EIP ? 0x9a : 0x9b;
    ss = 0x92;
    tr = 0x83;
    rdx = 0x600;
    mxcsr = 0;
    fcw = 0;
  } else if (vmm === 'gce') {
    gPat = 0x0007_0106n; // GCE's hypervisor replaces the default PAT
    rdx = 0x600;
    mxcsr = 0;
    fcw = 0;
  }
  return encode({
    es: seg(0, 0x93, 0xffff),
    cs: seg(0xf000, cs, 0xffff, (eip & 0xffff0000) >>> 0),
    ss: seg(0, ss, 0xffff),
    ds: seg(0, 0x93, 0xffff),
    fs: seg(0, 0x93, 0xffff),
    gs: seg(0, 0x93, 0xffff),
    gdtr: seg(0, 0, 0xffff),
    ldtr: seg(0, 0x82, 0xffff),
    idtr: seg(0, 0, 0xffff),
    tr: seg(0, tr, 0xffff),
    cr0: 0x10,
    rip: eip & 0xffff,
    gPat,
    rdx,
    sevFeatures,
    mxcsr,
    fcw,
  });
}

/** An SVSM's vCPUs start in 32-bit protected mode at the SVSM's entry point; the x87 control word stays 0. */
export function svsmVmsa(eip: number, vcpuSig: number): Buffer {
  const data = seg(16, 0xc93, 0xffffffff);
  return encode({
    es: data,
    cs: seg(8, 0xc9b, 0xffffffff),
    ss: data,
    ds: data,
    fs: data,
    gs: seg(0, 0x93, 0xffff),
    gdtr: seg(0, 0, 0xffff),
    ldtr: seg(0, 0x82, 0xffff),
    idtr: seg(0, 0, 0xffff),
    tr: seg(0, 0x8b, 0xffff),
    cr0: 0x11,
    rip: eip,
    gPat: DEFAULT_G_PAT,
    rdx: vcpuSig,
    sevFeatures: 0x1n,
    mxcsr: 0x1f80,
    fcw: 0,
  });
}

/** The boot processor's VMSA, then one AP VMSA for each further vCPU. */
export function vmsaPages(vcpus: number, bsp: Buffer, ap: Buffer | null): Buffer[] {
  const pages: Buffer[] = [];
  for (let i = 0; i < vcpus; i++) {
    if (i > 0 && ap === null) throw new MeasureError('ERR_MEASURE_INPUT', 'more than one vCPU needs an AP reset vector');
    pages.push(i === 0 ? bsp : ap!);
  }
  return pages;
}
