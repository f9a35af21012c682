import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { command as measureSelfCommand, run as runMeasureSelf } from './measure-self.ts';
import { MeasureError } from '../measure/errors.ts';
import { readSevFirmwareLayout } from '../measure/ovmf-sev-metadata.ts';
import { cmdlineDigest, sha256, type KernelHashes } from '../measure/sev-hashes.ts';
import { assertKernelMeasurable, sevEsLaunchDigest, sevLaunchDigest } from '../measure/sev-launch-digest.ts';
import { ovmfLaunchDigest, snpLaunchDigest, svsmLaunchDigest, type SnpVmm } from '../measure/snp-launch-digest.ts';
import { DEFAULT_ACPI_DATA_SIZE } from '../measure/qemu-kernel-setup.ts';
import { measureTdx } from '../measure/tdx-measurements.ts';
import { cpuSignature, vcpuSignature } from '../measure/vcpu-types.ts';
import { UsageError, UnreadableError } from './cli-errors.ts';
import { chooseSubcommand, parseCommandLine, refuseUsage, type CommandSpec } from './command-line.ts';

/** Exit statuses: 0 printed; 1 the inputs cannot be measured; 2 bad usage; 3 an input could not be read. */
export const MEASURE_EXIT = { ok: 0, failed: 1, usage: 2, unreadable: 3 } as const;

export interface MeasureIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

async function readInput(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (error) {
    throw new UnreadableError(`cannot read the ${what} ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

function hexBytes(value: string, option: string, bytes: number): Buffer {
  const hex = value.replace(/^0x/i, '').toLowerCase();
  if (!/^[0-9a-f]*$/.test(hex) || hex.length !== bytes * 2)
    throw new UsageError(`${option} must be ${bytes * 2} hex digits (${bytes} bytes), got ${JSON.stringify(value)}`);
  return Buffer.from(hex, 'hex');
}

/** A non-negative integer given in decimal or 0x-hex. */
export function integerOption(value: string, option: string, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^(0x[0-9a-f]+|\d+)$/i.test(value) || Number(value) > max)
    throw new UsageError(`${option} must be a whole number (decimal or 0x hex) up to ${max}, got ${JSON.stringify(value)}`);
  return Number(value);
}

function vcpuSig(values: Record<string, string | boolean | undefined>, required: boolean): number {
  const parts = ['vcpu-family', 'vcpu-model', 'vcpu-stepping'].filter((name) => values[name] !== undefined);
  const ways = [values['vcpu-type'] !== undefined, values['vcpu-sig'] !== undefined, parts.length > 0].filter(Boolean).length;
  if (ways > 1) throw new UsageError('give the vCPU as one of --vcpu-type, --vcpu-sig or --vcpu-family/--vcpu-model/--vcpu-stepping');
  if (typeof values['vcpu-type'] === 'string') return vcpuSignature(values['vcpu-type']);
  if (typeof values['vcpu-sig'] === 'string') return integerOption(values['vcpu-sig'], '--vcpu-sig', 0xffffffff);
  if (parts.length === 3) {
    return cpuSignature(
      integerOption(values['vcpu-family'] as string, '--vcpu-family', 0xff + 0xf),
      integerOption(values['vcpu-model'] as string, '--vcpu-model', 0xff),
      integerOption(values['vcpu-stepping'] as string, '--vcpu-stepping', 0xf),
    );
  }
  if (parts.length > 0) throw new UsageError('--vcpu-family, --vcpu-model and --vcpu-stepping go together');
  if (required) throw new UsageError('the vCPU type is needed: give --vcpu-type (e.g. EPYC-v4), --vcpu-sig or --vcpu-family/--vcpu-model/--vcpu-stepping');
  return 0;
}

async function digestOf(values: Record<string, string | boolean | undefined>, name: 'kernel' | 'initrd'): Promise<Buffer | null> {
  const file = values[name],
    hash = values[`${name}-sha256`];
  if (typeof file === 'string' && typeof hash === 'string') throw new UsageError(`give --${name} or --${name}-sha256, not both`);
  if (typeof hash === 'string') return hexBytes(hash, `--${name}-sha256`, 32);
  if (typeof file === 'string') return sha256(await readInput(file, name));
  return null;
}

async function kernelInputs(values: Record<string, string | boolean | undefined>): Promise<KernelHashes | null> {
  const kernel = await digestOf(values, 'kernel');
  const initrd = await digestOf(values, 'initrd');
  const append = typeof values.append === 'string' ? values.append : null;
  if (kernel === null) {
    if (initrd !== null || append !== null) throw new UsageError('--initrd and --append are measured only with a kernel: give --kernel or --kernel-sha256');
    return null;
  }
  return { kernel, initrd: initrd ?? sha256(new Uint8Array()), cmdline: cmdlineDigest(append) };
}

const snpCommand = {
  name: 'measure snp',
  summary: "Prints the AMD SEV-SNP launch digest (the attestation report's MEASUREMENT) as a reference-values file.",
  options: {
    ovmf: {
      type: 'string',
      value: 'FILE',
      description:
        'the OVMF image the VM boots (QEMU -bios). With --ovmf-hash, only its last pages holding the footer table and SEV metadata are needed (e.g. the last 4 KiB)',
    },
    'ovmf-hash': {
      type: 'string',
      value: 'HEX',
      description: 'the published launch digest of the OVMF pages alone (48 bytes), used instead of hashing the image (mode snp only)',
    },
    mode: {
      type: 'string',
      value: 'MODE',
      description:
        'snp; snp:svsm, a Coconut SVSM below OVMF (QEMU only); seves or sev, whose launch digest is a 32-byte SHA-256 (printed as hex: sigil verify does not accept SEV or SEV-ES evidence)',
      default: 'snp',
    },
    kernel: {
      type: 'string',
      value: 'FILE',
      description: 'the kernel of measured direct boot (QEMU -kernel); without it the kernel-hashes page is measured as zeros',
    },
    'kernel-sha256': { type: 'string', value: 'HEX', description: "the kernel's SHA-256 instead of the file" },
    initrd: { type: 'string', value: 'FILE', description: 'the initrd (QEMU -initrd); absent means an empty initrd' },
    'initrd-sha256': { type: 'string', value: 'HEX', description: "the initrd's SHA-256 instead of the file" },
    append: { type: 'string', value: 'TEXT', description: 'the kernel command line (QEMU -append); absent means an empty one' },
    vcpus: { type: 'string', value: 'N', description: 'the number of vCPUs', default: '1' },
    'vcpu-type': {
      type: 'string',
      value: 'NAME',
      description: "QEMU's CPU model: EPYC, EPYC-v1..v4, EPYC-IBPB, EPYC-Rome(-v1..v3), EPYC-Milan(-v1,-v2), EPYC-Genoa(-v1), EPYC-Turin",
    },
    'vcpu-sig': { type: 'string', value: 'N', description: 'the CPUID signature instead of a model (e.g. 0x800f12)' },
    'vcpu-family': { type: 'string', value: 'N', description: "the signature's family, with --vcpu-model and --vcpu-stepping, instead" },
    'vcpu-model': { type: 'string', value: 'N', description: "the signature's model" },
    'vcpu-stepping': { type: 'string', value: 'N', description: "the signature's stepping" },
    'guest-features': { type: 'string', value: 'N', description: 'SEV_FEATURES of each VMSA (0x1: SNP active; 0x21 adds debug swap)', default: '0x1' },
    vmm: {
      type: 'string',
      value: 'TYPE',
      description: 'the hypervisor: qemu, ec2, gce; ec2-legacy is EC2 before it set RDX to 0x600 in the initial vCPU state',
      default: 'qemu',
    },
    svsm: { type: 'string', value: 'FILE', description: 'the Coconut SVSM image (mode snp:svsm)' },
    'ovmf-vars-size': { type: 'string', value: 'N', description: 'the size in bytes of the OVMF variable store between SVSM and OVMF (snp:svsm)' },
    digest: { type: 'boolean', description: 'print only the digest in hex', default: false },
    'only-ovmf': { type: 'boolean', description: 'print only the launch digest of the OVMF pages: the value to publish for --ovmf-hash', default: false },
  },
  notes: `The reference-values file printed:
  snp:
    measurement: [<96 hex digits>]

Exit status: 0 printed, 1 the inputs cannot be measured, 2 bad usage, 3 a file could not be read.`,
} as const satisfies CommandSpec;

const VMMS: readonly SnpVmm[] = ['qemu', 'ec2', 'gce', 'ec2-legacy'];

/** The reference-values file (docs/attestation.md) that pins an SEV-SNP launch measurement. */
export function snpReferenceFile(digest: Buffer, inputs: string[]): string {
  return `# sigil measure snp\n${inputs.map((line) => `#   ${line}\n`).join('')}snp:\n  measurement:\n    - ${digest.toString('hex')}\n`;
}

/** Computes the launch digest named by `argv` and describes its inputs for the printed file's comment. */
async function measureSnp(
  values: Record<string, string | boolean | undefined>,
): Promise<{ digest: Buffer; snp: boolean; inputs: string[]; digestOnly: boolean }> {
  const mode = String(values.mode).toLowerCase();
  if (!['snp', 'snp:svsm', 'seves', 'sev'].includes(mode))
    throw new UsageError(`--mode must be snp, snp:svsm, seves or sev, got ${JSON.stringify(values.mode)}`);
  const vmm = String(values.vmm).toLowerCase() as SnpVmm;
  if (!VMMS.includes(vmm)) throw new UsageError(`--vmm must be one of ${VMMS.join(', ')}, got ${JSON.stringify(values.vmm)}`);
  if (typeof values.ovmf !== 'string') throw new UsageError('--ovmf FILE is required: the firmware decides what is measured');
  if (values['ovmf-hash'] !== undefined && mode !== 'snp') throw new UsageError('--ovmf-hash works only with --mode snp');
  const svsmOnly = ['svsm', 'ovmf-vars-size'].filter((name) => values[name] !== undefined);
  if (mode !== 'snp:svsm' && svsmOnly.length > 0) throw new UsageError(`--${svsmOnly[0]} works only with --mode snp:svsm`);
  const vcpus = integerOption(String(values.vcpus), '--vcpus', 512);
  const guestFeatures = BigInt(integerOption(String(values['guest-features']), '--guest-features'));
  const image = await readInput(values.ovmf, 'OVMF image');
  const inputs = [`ovmf ${values.ovmf} sha256:${createHash('sha256').update(image).digest('hex')}`];
  const digestOnly = values.digest === true;
  if (values['only-ovmf'] === true) {
    const others = Object.keys(values).filter((name) => !['ovmf', 'only-ovmf', 'mode', 'vcpus', 'guest-features', 'vmm', 'digest'].includes(name));
    if (others.length > 0 || mode !== 'snp') throw new UsageError(`--only-ovmf measures the OVMF image alone: leave out --${others[0] ?? 'mode'}`);
    return { digest: ovmfLaunchDigest(image, readSevFirmwareLayout(image).gpa), snp: false, inputs, digestOnly };
  }

  if (mode === 'snp:svsm') {
    if (vmm !== 'qemu') throw new UsageError('--mode snp:svsm is modelled for QEMU only');
    if (typeof values.svsm !== 'string' || values['ovmf-vars-size'] === undefined)
      throw new UsageError('--mode snp:svsm needs --svsm FILE and --ovmf-vars-size N');
    if (['kernel', 'kernel-sha256', 'initrd', 'initrd-sha256', 'append'].some((name) => values[name] !== undefined))
      throw new UsageError('--mode snp:svsm does not measure a kernel: leave out --kernel, --initrd and --append');
    const svsm = await readInput(values.svsm, 'SVSM image');
    const ovmfVarsSize = integerOption(String(values['ovmf-vars-size']), '--ovmf-vars-size');
    const digest = svsmLaunchDigest({ ovmf: image, svsm, ovmfVarsSize, vcpus, vcpuSig: vcpuSig(values, true) });
    inputs.push(`svsm ${values.svsm} sha256:${sha256(svsm).toString('hex')}`, `ovmf vars ${ovmfVarsSize} bytes, ${vcpus} vCPU, qemu`);
    return { digest, snp: true, inputs, digestOnly };
  }
  const kernel = await kernelInputs(values);
  const layout = readSevFirmwareLayout(image);
  if (kernel !== null)
    inputs.push(
      `kernel sha256:${kernel.kernel.toString('hex')}`,
      `initrd sha256:${kernel.initrd.toString('hex')}`,
      `cmdline sha256:${kernel.cmdline.toString('hex')} (with its NUL)`,
    );
  else inputs.push('no kernel (not measured direct boot)');
  if (mode === 'sev') return { digest: sevLaunchDigest({ image, layout, kernel }), snp: false, inputs, digestOnly };
  if (mode === 'seves') assertKernelMeasurable(layout, kernel);
  const sig = vcpuSig(values, true);
  if (mode === 'seves') {
    if (vmm === 'ec2-legacy') throw new UsageError('--vmm ec2-legacy applies to SNP only');
    return { digest: sevEsLaunchDigest({ image, layout, kernel, vcpus, vcpuSig: sig, vmm }), snp: false, inputs, digestOnly };
  }
  const ovmfDigest = typeof values['ovmf-hash'] === 'string' ? hexBytes(values['ovmf-hash'], '--ovmf-hash', 48) : null;
  if (ovmfDigest !== null) inputs.push(`ovmf pages' launch digest ${ovmfDigest.toString('hex')} (given)`);
  const firmware = ovmfDigest === null ? { image } : { ovmfDigest };
  inputs.push(`${vcpus} vCPU, signature 0x${sig.toString(16)}, guest features 0x${guestFeatures.toString(16)}, ${vmm}`);
  return { digest: snpLaunchDigest({ layout, firmware, kernel, vcpus, vcpuSig: sig, guestFeatures, vmm }), snp: true, inputs, digestOnly };
}

async function runSnp(values: Values, io: MeasureIo): Promise<number> {
  // snp's options hold no list (none is `multiple`).
  const { digest, snp, inputs, digestOnly } = await measureSnp(values as Record<string, string | boolean | undefined>);
  io.stdout.write(digestOnly || !snp ? `${digest.toString('hex')}\n` : snpReferenceFile(digest, inputs));
  return MEASURE_EXIT.ok;
}

const tdxCommand = {
  name: 'measure tdx',
  summary: `Prints Intel TDX measurements as a reference-values file: MRTD from the firmware; RTMR1 and RTMR2 when a
kernel is given (measured direct boot); RTMR0 when the firmware configuration and ACPI tables are given.
A register not computed is left out (not pinned) and a comment says what it needs.`,
  options: {
    firmware: { type: 'string', value: 'FILE', description: 'the TDX firmware (TDVF, an OVMF.fd built with TDX support)' },
    'page-add-order': {
      type: 'string',
      value: 'ORDER',
      description: "how the VMM adds the firmware's pages to the TD: single-pass (QEMU 9 and later) or two-pass (QEMU 8)",
      default: 'single-pass',
    },
    memory: {
      type: 'string',
      value: 'SIZE',
      description: 'the guest memory, in bytes or with a K, M, G or T suffix (e.g. 2G); needed for RTMR0 and, with an initrd, for RTMR1',
    },
    kernel: { type: 'string', value: 'FILE', description: 'the kernel QEMU boots directly (-kernel), a PE/COFF (EFI stub) image' },
    initrd: { type: 'string', value: 'FILE', description: 'the initrd (-initrd); absent means none' },
    append: { type: 'string', value: 'TEXT', description: 'the kernel command line (-append); absent means an empty one' },
    'acpi-data-size': {
      type: 'string',
      value: 'N',
      description: 'the ACPI space QEMU reserves below 4 GiB, which moves the initrd',
      default: `0x${DEFAULT_ACPI_DATA_SIZE.toString(16)}`,
    },
    'acpi-tables': { type: 'string', value: 'FILE', description: "QEMU's fw_cfg file etc/acpi/tables, as the VM has it" },
    'acpi-rsdp': { type: 'string', value: 'FILE', description: "QEMU's fw_cfg file etc/acpi/rsdp" },
    'acpi-loader': { type: 'string', value: 'FILE', description: "QEMU's fw_cfg file etc/table-loader" },
    'boot-order': { type: 'string', value: 'FILE', description: "the BootOrder variable's data as OVMF measures it (e.g. the two bytes 00 00)" },
    'boot-option': {
      type: 'string',
      value: 'FILE',
      description: "a Boot#### variable's data (an EFI_LOAD_OPTION), once for each in BootOrder",
      multiple: true,
    },
    digest: { type: 'boolean', description: 'print the values as NAME HEX lines instead of a reference-values file', default: false },
  },
  notes: 'Exit status: 0 printed, 1 the inputs cannot be measured, 2 bad usage, 3 a file could not be read.',
} as const satisfies CommandSpec;

const SIZE_UNITS: Record<string, number> = { '': 1, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30, T: 2 ** 40 };

/** A memory size such as 2147483648, 2048M or 2G. */
export function memorySizeOption(value: string): number {
  const match = /^(\d+)([KMGT]?)i?B?$/i.exec(value);
  const bytes = match === null ? NaN : Number(match[1]) * SIZE_UNITS[match[2]!.toUpperCase()]!;
  if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new UsageError(`--memory must be a size such as 2G, 2048M or 2147483648, got ${JSON.stringify(value)}`);
  return bytes;
}

const RTMR0_FILES = ['acpi-tables', 'acpi-rsdp', 'acpi-loader', 'boot-order'] as const;

async function runTdx(values: Values, io: MeasureIo): Promise<number> {
  const order = String(values['page-add-order']);
  if (order !== 'single-pass' && order !== 'two-pass') throw new UsageError(`--page-add-order must be single-pass or two-pass, got ${JSON.stringify(order)}`);
  if (typeof values.firmware !== 'string') throw new UsageError('--firmware FILE is required: MRTD is the measurement of the firmware');
  if (typeof values.kernel !== 'string' && (values.initrd !== undefined || values.append !== undefined))
    throw new UsageError('--initrd and --append are measured only with a kernel: give --kernel');
  const given = RTMR0_FILES.filter((name) => values[name] !== undefined);
  if ((given.length > 0 || values['boot-option'] !== undefined) && given.length < RTMR0_FILES.length) {
    throw new UsageError(
      `RTMR0 needs all of ${RTMR0_FILES.map((n) => `--${n}`).join(', ')}; missing ${RTMR0_FILES.filter((n) => !given.includes(n))
        .map((n) => `--${n}`)
        .join(', ')}`,
    );
  }
  const memorySize = typeof values.memory === 'string' ? memorySizeOption(values.memory) : null;
  const acpiDataSize = integerOption(String(values['acpi-data-size']), '--acpi-data-size', 0xffffffff);
  const firmware = await readInput(values.firmware, 'firmware');
  const boot =
    typeof values.kernel === 'string'
      ? {
          kernel: await readInput(values.kernel, 'kernel'),
          initrd: typeof values.initrd === 'string' ? await readInput(values.initrd, 'initrd') : Buffer.alloc(0),
          cmdline: typeof values.append === 'string' ? values.append : '',
        }
      : null;
  const config =
    given.length === RTMR0_FILES.length
      ? {
          acpiTables: await readInput(values['acpi-tables'] as string, 'ACPI tables'),
          acpiRsdp: await readInput(values['acpi-rsdp'] as string, 'ACPI RSDP'),
          acpiLoader: await readInput(values['acpi-loader'] as string, 'ACPI table loader'),
          bootVariables: [
            await readInput(values['boot-order'] as string, 'BootOrder variable'),
            ...(await Promise.all(((values['boot-option'] as string[] | undefined) ?? []).map((f) => readInput(f, 'boot option variable')))),
          ],
        }
      : null;
  const m = measureTdx({ firmware, pageAddOrder: order, memorySize, acpiDataSize, boot, config });
  const rows: [string, Buffer | null, string][] = [
    ['mrtd', m.mrtd, ''],
    ['rtmr0', m.rtmr0, 'give the ACPI tables and boot variables (--acpi-tables, --acpi-rsdp, --acpi-loader, --boot-order) and --memory'],
    ['rtmr1', m.rtmr1, 'give --kernel'],
    ['rtmr2', m.rtmr2, 'give --kernel'],
  ];
  if (values.digest === true) {
    io.stdout.write(
      rows
        .filter(([, v]) => v !== null)
        .map(([name, v]) => `${name} ${v!.toString('hex')}\n`)
        .join(''),
    );
    return MEASURE_EXIT.ok;
  }
  const header = [`# sigil measure tdx`, `#   firmware ${values.firmware} sha256:${sha256(firmware).toString('hex')}, ${order}`];
  if (boot !== null)
    header.push(
      `#   kernel sha256:${sha256(boot.kernel).toString('hex')}`,
      `#   initrd sha256:${sha256(boot.initrd).toString('hex')}`,
      `#   cmdline ${JSON.stringify(boot.cmdline)}`,
    );
  if (memorySize !== null) header.push(`#   memory ${memorySize} bytes`);
  const body = rows
    .map(([name, v, need]) => (v === null ? `  # ${name}: not computed (not pinned): ${need}\n` : `  ${name}:\n    - ${v.toString('hex')}\n`))
    .join('');
  io.stdout.write(`${header.join('\n')}\ntdx:\n${body}`);
  return MEASURE_EXIT.ok;
}

type Values = Record<string, string | boolean | string[] | undefined>;

export const command = {
  name: 'measure',
  summary: `Computes, from the firmware, the kernel, the initrd, the command line and the VM's shape, the launch
measurement a confidential VM reports, and prints it as a reference-values file for sigil verify
(--reference). See docs/measure.md.`,
  options: {},
  subcommands: [measureSelfCommand, snpCommand, tdxCommand],
} as const satisfies CommandSpec;

const PLATFORMS = new Map<CommandSpec, (values: Values, io: MeasureIo) => Promise<number>>([
  [snpCommand, runSnp],
  [tdxCommand, runTdx],
]);

/** `sigil measure self|snp|tdx` with its output and errors sent to `io`. */
export async function measureCommand(argv: string[], io: MeasureIo): Promise<number> {
  const chosen = chooseSubcommand(command, argv, io);
  if (typeof chosen === 'number') return chosen;
  // The running Sigil's own manifest digest (docs/auditing.md).
  if (chosen.sub === measureSelfCommand) return runMeasureSelf(chosen.argv);
  const line = parseCommandLine(chosen.sub, chosen.argv, io);
  if (typeof line === 'number') return line;
  const name = chosen.sub.name;
  try {
    return await PLATFORMS.get(chosen.sub)!(line.values as Values, io);
  } catch (error) {
    if (error instanceof UsageError) return refuseUsage(chosen.sub, error.message, io);
    if (error instanceof UnreadableError) {
      io.stderr.write(`sigil ${name}: ${error.message}\n`);
      return MEASURE_EXIT.unreadable;
    }
    if (error instanceof MeasureError) {
      io.stderr.write(`sigil ${name}: ${error.message} (${error.code})\n`);
      return MEASURE_EXIT.failed;
    }
    throw error;
  }
}

export function run(argv: string[]): Promise<number> {
  return measureCommand(argv, { stdout: process.stdout, stderr: process.stderr });
}
