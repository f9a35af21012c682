import { actionDigest, EFI_GLOBAL_VARIABLE, EFI_IMAGE_SECURITY_DATABASE, efiVariableData, SEPARATOR_DIGEST, sha384, tdxCmdlineDigest } from './rtmr.ts';

/** What OVMF measures into RTMR0 that a verifier cannot derive from the firmware alone, each as its SHA-384. */
export interface Rtmr0Digests {
  /** The TD HOB (td-hob.ts). */
  tdHob: Uint8Array;
  /** The firmware's configuration volume (the TDVF CFV section: its variable store). */
  cfv: Uint8Array;
  /** QEMU's fw_cfg files etc/table-loader, etc/acpi/rsdp and etc/acpi/tables. */
  acpiLoader: Uint8Array;
  acpiRsdp: Uint8Array;
  acpiTables: Uint8Array;
  /** The BootOrder variable's data, then each Boot#### it names, as OVMF measures them. */
  bootVariables: Uint8Array[];
}

/**
 * RTMR0's events in OVMF's order: the TD HOB, the configuration volume, the Secure Boot variables (empty:
 * Secure Boot off), the separator, the three ACPI blobs, the boot variables.
 */
export function rtmr0Events(d: Rtmr0Digests): Buffer[] {
  const variables: [string, string][] = [
    [EFI_GLOBAL_VARIABLE, 'SecureBoot'],
    [EFI_GLOBAL_VARIABLE, 'PK'],
    [EFI_GLOBAL_VARIABLE, 'KEK'],
    [EFI_IMAGE_SECURITY_DATABASE, 'db'],
    [EFI_IMAGE_SECURITY_DATABASE, 'dbx'],
  ];
  return [
    Buffer.from(d.tdHob),
    Buffer.from(d.cfv),
    ...variables.map(([guid, name]) => sha384(efiVariableData(guid, name))),
    SEPARATOR_DIGEST,
    Buffer.from(d.acpiLoader),
    Buffer.from(d.acpiRsdp),
    Buffer.from(d.acpiTables),
    ...d.bootVariables.map((v) => Buffer.from(v)),
  ];
}

/** RTMR1's events for a kernel started by direct boot: the kernel's Authenticode digest, then OVMF's fixed actions. */
export function rtmr1Events(kernelDigest: Uint8Array): Buffer[] {
  return [
    Buffer.from(kernelDigest),
    actionDigest('Calling EFI Application from Boot Option'),
    SEPARATOR_DIGEST,
    actionDigest('Exit Boot Services Invocation'),
    actionDigest('Exit Boot Services Returned with Success'),
  ];
}

/**
 * RTMR2's events: the command line the kernel receives (OVMF appends " initrd=initrd" when it passes an
 * initrd) and the initrd.
 */
export function rtmr2Events(cmdline: string, initrd: Uint8Array): Buffer[] {
  const loadOptions = initrd.length > 0 ? `${cmdline} initrd=initrd` : cmdline;
  return [tdxCmdlineDigest(loadOptions), sha384(initrd)];
}
