/** TCG PC Client Platform Firmware Profile event types (section 10.4.1), and dstack's runtime event type. */
export const EV_NO_ACTION = 0x3;
export const EV_SEPARATOR = 0x4;
export const EV_ACTION = 0x5;
export const EV_EVENT_TAG = 0x6;
export const EV_IPL = 0xd;
export const EV_EFI_VARIABLE_DRIVER_CONFIG = 0x80000001;
export const EV_EFI_ACTION = 0x80000007;
/** dstack's RTMR3 events; not a TCG type. Digest: SHA-384(type as u32 LE || ":" || name || ":" || payload). */
export const DSTACK_RUNTIME_EVENT = 0x08000001;

const NAMES: Record<number, string> = {
  0x0: 'EV_PREBOOT_CERT',
  0x1: 'EV_POST_CODE',
  0x2: 'EV_UNUSED',
  0x3: 'EV_NO_ACTION',
  0x4: 'EV_SEPARATOR',
  0x5: 'EV_ACTION',
  0x6: 'EV_EVENT_TAG',
  0x7: 'EV_S_CRTM_CONTENTS',
  0x8: 'EV_S_CRTM_VERSION',
  0x9: 'EV_CPU_MICROCODE',
  0xa: 'EV_PLATFORM_CONFIG_FLAGS',
  0xb: 'EV_TABLE_OF_DEVICES',
  0xc: 'EV_COMPACT_HASH',
  0xd: 'EV_IPL',
  0xe: 'EV_IPL_PARTITION_DATA',
  0xf: 'EV_NONHOST_CODE',
  0x10: 'EV_NONHOST_CONFIG',
  0x11: 'EV_NONHOST_INFO',
  0x12: 'EV_OMIT_BOOT_DEVICE_EVENTS',
  0x80000001: 'EV_EFI_VARIABLE_DRIVER_CONFIG',
  0x80000002: 'EV_EFI_VARIABLE_BOOT',
  0x80000003: 'EV_EFI_BOOT_SERVICES_APPLICATION',
  0x80000004: 'EV_EFI_BOOT_SERVICES_DRIVER',
  0x80000005: 'EV_EFI_RUNTIME_SERVICES_DRIVER',
  0x80000006: 'EV_EFI_GPT_EVENT',
  0x80000007: 'EV_EFI_ACTION',
  0x80000008: 'EV_EFI_PLATFORM_FIRMWARE_BLOB',
  0x80000009: 'EV_EFI_HANDOFF_TABLES',
  0x8000000a: 'EV_EFI_PLATFORM_FIRMWARE_BLOB2',
  0x8000000b: 'EV_EFI_HANDOFF_TABLES2',
  0x8000000c: 'EV_EFI_VARIABLE_BOOT2',
  0x80000010: 'EV_EFI_HCRTM_EVENT',
  0x800000e0: 'EV_EFI_VARIABLE_AUTHORITY',
  0x800000e1: 'EV_EFI_SPDM_FIRMWARE_BLOB',
  0x800000e2: 'EV_EFI_SPDM_FIRMWARE_CONFIG',
  [DSTACK_RUNTIME_EVENT]: 'DSTACK_RUNTIME_EVENT',
};

export function eventTypeName(type: number): string {
  return NAMES[type] ?? `0x${type.toString(16).padStart(8, '0')}`;
}

/**
 * Types whose digest is, by the TCG profile, the hash of the event data itself: for these the logged data
 * must hash to the digest, or the log shows one thing and measured another.
 */
export const DATA_IS_MEASURED: ReadonlySet<number> = new Set([EV_SEPARATOR, EV_ACTION, EV_EFI_ACTION, EV_EFI_VARIABLE_DRIVER_CONFIG]);
