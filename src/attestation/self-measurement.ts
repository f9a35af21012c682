/**
 * Sigil measures itself into TDX RTMR3 (SPEC 10): at start it extends RTMR3 with ONE event whose digest covers its
 * installed code, its configuration file and the policy hash, and publishes the event (and the CCEL boot log) in the
 * attestation document, so a quote proves which proxy runs, not only which firmware booted.
 *
 * The kernel interface is the TDX guest driver's measurement registers (Linux 6.16+,
 * Documentation/ABI/testing/sysfs-devices-virtual-misc-tdx_guest): `rtmr3:sha384` reads the register's 48 bytes,
 * and writing exactly 48 bytes extends it: RTMR3 = SHA-384(RTMR3 || written bytes).
 *
 * RTMR3 lives as long as the VM, Sigil may restart inside it: every event extended is also appended to a runtime
 * log on tmpfs (`/run`, cleared with the VM), and each start publishes all of them, so the replay still matches.
 */
import { createHash } from 'node:crypto';
import * as nodeFs from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { canonicalJson } from '../protocol/jcs.ts';
import type { EventLog, RuntimeEvent } from '../protocol/attestation.ts';

export const DEFAULT_RTMR3_PATH = '/sys/class/misc/tdx_guest/measurements/rtmr3:sha384';
export const DEFAULT_CCEL_TABLE_PATH = '/sys/firmware/acpi/tables/CCEL';
export const DEFAULT_CCEL_DATA_PATH = '/sys/firmware/acpi/tables/data/CCEL';
export const DEFAULT_RUNTIME_LOG_PATH = '/run/sigil/rtmr-events.json';

/** The `event` name of Sigil's own RTMR3 event, and the `kind` inside its payload (a domain label). */
export const SELF_MEASUREMENT_EVENT = 'sigil';
export const SELF_MEASUREMENT_KIND = 'sigil-self-measurement/1';

const RTMR_BYTES = 48;
const WHY_IT_MATTERS = 'the quote proves the firmware and boot chain, not which proxy runs';

/** The register operations self measurement needs; injectable because sysfs extend semantics cannot be had on a normal filesystem. */
export interface RtmrFs {
  /** The register's current value (48 bytes). */
  read(path: string): Promise<Uint8Array>;
  /** Writes exactly these bytes at offset 0 of an existing attribute, which extends the register; never creates the file. */
  extend(path: string, digest: Uint8Array): Promise<void>;
}

export const nodeRtmrFs: RtmrFs = {
  read: async (path) => new Uint8Array(await nodeFs.readFile(path)),
  extend: async (path, digest) => {
    const handle = await nodeFs.open(path, 'r+');
    try {
      const { bytesWritten } = await handle.write(digest, 0, digest.length, 0);
      if (bytesWritten !== digest.length) throw Object.assign(new Error(`wrote ${bytesWritten} of ${digest.length} bytes`), { code: 'EIO' });
    } finally {
      await handle.close();
    }
  },
};

/** The folder of Sigil's running code: `dist/` when installed, `src/` when run from source. */
export function runningCodeDir(): string {
  return dirname(dirname(fileURLToPath(import.meta.url)));
}

async function listFiles(dir: string, prefix: string, seen: Set<string>): Promise<string[]> {
  const real = await nodeFs.realpath(dir);
  if (seen.has(real)) return [];
  seen.add(real);
  const out: string[] = [];
  for (const name of await nodeFs.readdir(dir)) {
    if (name === 'node_modules') continue;
    const path = join(dir, name);
    const rel = prefix === '' ? name : `${prefix}/${name}`;
    if (rel.includes('\n')) throw new Error(`the file name ${JSON.stringify(rel)} holds a newline, which the manifest cannot list`);
    const stat = await nodeFs.stat(path); // follows symbolic links, as `find -L` does
    if (stat.isDirectory()) out.push(...(await listFiles(path, rel, seen)));
    else if (stat.isFile()) out.push(rel);
  }
  return out;
}

/**
 * The code manifest: one `sha256sum` line (`<hex>  <path>\n`) per regular file under `dir`, paths relative and
 * sorted bytewise, skipping node_modules. An auditor gets the same text from
 * `cd dist && find -L . -name node_modules -prune -o -type f -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum`.
 */
export async function codeManifest(dir: string): Promise<string> {
  const files = (await listFiles(dir, '', new Set())).sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
  const lines: string[] = [];
  for (const rel of files) {
    const digest = createHash('sha256').update(await nodeFs.readFile(join(dir, rel))).digest('hex');
    lines.push(`${digest}  ${rel}\n`);
  }
  return lines.join('');
}

export interface SelfMeasurementInputs {
  sigilVersion: string;
  /** The basename of the code folder hashed (`dist` or `src`). */
  codeRoot: string;
  codeSha256: string;
  configSha256: string;
  policyHash: string;
}

/** The exact payload text: canonical JSON (JCS) of what is measured, so anyone can recompute its SHA-384. */
export function selfMeasurementPayload(inputs: SelfMeasurementInputs): string {
  return canonicalJson({
    kind: SELF_MEASUREMENT_KIND,
    sigil_version: inputs.sigilVersion,
    code_root: inputs.codeRoot,
    code_sha256: inputs.codeSha256,
    config_sha256: inputs.configSha256,
    policy_hash: inputs.policyHash,
  });
}

/** The RTMR3 event for a payload: digest = SHA-384 of the payload's UTF-8. */
export function selfMeasurementEvent(payload: string): RuntimeEvent {
  return { imr: 3, event: SELF_MEASUREMENT_EVENT, digest: createHash('sha384').update(payload, 'utf8').digest('hex'), payload };
}

export interface SelfMeasurementOptions {
  /** The config file whose bytes are measured. */
  configPath: string;
  policyHash: string;
  rtmrPath?: string;
  ccelTablePath?: string;
  ccelDataPath?: string;
  runtimeLogPath?: string;
  /** The code folder to hash; default the running code's (`dist/` or `src/`). */
  codeDir?: string;
  /** Default: the version in the package.json next to the code folder. */
  sigilVersion?: string;
  fs?: RtmrFs;
}

const errCode = (err: unknown): string => (err as NodeJS.ErrnoException).code ?? (err as Error).message;

async function readBase64OrNull(path: string): Promise<string | null> {
  try {
    return (await nodeFs.readFile(path)).toString('base64');
  } catch {
    return null;
  }
}

function isRuntimeEvent(value: unknown): value is RuntimeEvent {
  const e = value as Record<string, unknown>;
  return typeof e === 'object' && e !== null && Number.isInteger(e.imr) && typeof e.event === 'string' && typeof e.digest === 'string' && typeof e.payload === 'string';
}

/** The events earlier starts of Sigil extended in this VM, or why they cannot be read. */
async function readRuntimeLog(path: string): Promise<RuntimeEvent[] | string> {
  let text: string;
  try {
    text = await nodeFs.readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    return `the log of earlier RTMR3 events (${path}) cannot be read (${errCode(err)})`;
  }
  try {
    const events = JSON.parse(text) as unknown;
    if (Array.isArray(events) && events.every(isRuntimeEvent)) return events;
  } catch {
    // reported below
  }
  return `the log of earlier RTMR3 events (${path}) is not a JSON list of events`;
}

async function measureInputs(opts: SelfMeasurementOptions): Promise<string> {
  const codeDir = opts.codeDir ?? runningCodeDir();
  const sigilVersion = opts.sigilVersion ?? (JSON.parse(await nodeFs.readFile(join(dirname(codeDir), 'package.json'), 'utf8')) as { version: string }).version;
  return selfMeasurementPayload({
    sigilVersion,
    codeRoot: basename(codeDir),
    codeSha256: createHash('sha256').update(await codeManifest(codeDir), 'utf8').digest('hex'),
    configSha256: createHash('sha256').update(await nodeFs.readFile(opts.configPath)).digest('hex'),
    policyHash: opts.policyHash,
  });
}

function refusal(path: string, err: unknown): string {
  const code = errCode(err);
  if (code === 'ENOENT') return `the kernel exposes no writable RTMR3 (${path} is absent; the TDX guest driver offers it from Linux 6.16)`;
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return `writing RTMR3 (${path}) was refused (${code}): Sigil needs write access to it`;
  return `extending RTMR3 through ${path} failed (${code})`;
}

/**
 * Reads the CCEL boot log, extends RTMR3 once with Sigil's own event and returns the document's `event_log`. Never
 * throws: when Sigil cannot measure itself, `self_measurement` says why in words and the events stay as they were.
 */
export async function measureSelfIntoRtmr3(opts: SelfMeasurementOptions): Promise<EventLog> {
  const fs = opts.fs ?? nodeRtmrFs;
  const rtmrPath = opts.rtmrPath ?? DEFAULT_RTMR3_PATH;
  const logPath = opts.runtimeLogPath ?? DEFAULT_RUNTIME_LOG_PATH;
  const [ccelTable, ccelData] = await Promise.all([readBase64OrNull(opts.ccelTablePath ?? DEFAULT_CCEL_TABLE_PATH), readBase64OrNull(opts.ccelDataPath ?? DEFAULT_CCEL_DATA_PATH)]);
  const log = (runtimeEvents: RuntimeEvent[], extended: boolean, reason: string | null): EventLog => ({
    ccel_table: ccelTable,
    ccel_data: ccelData,
    runtime_events: runtimeEvents,
    self_measurement: { extended, reason },
  });

  const earlier = await readRuntimeLog(logPath);
  if (typeof earlier === 'string') return log([], false, `${earlier}, so RTMR3 could not be explained after one more event: ${WHY_IT_MATTERS}`);
  let event: RuntimeEvent;
  try {
    event = selfMeasurementEvent(await measureInputs(opts));
  } catch (err) {
    return log(earlier, false, `Sigil could not hash its own code and configuration (${errCode(err)}): ${WHY_IT_MATTERS}`);
  }
  const digest = new Uint8Array(Buffer.from(event.digest, 'hex'));
  const before = await fs.read(rtmrPath).catch(() => undefined);
  try {
    await fs.extend(rtmrPath, digest);
  } catch (err) {
    return log(earlier, false, `${refusal(rtmrPath, err)}: ${WHY_IT_MATTERS}`);
  }
  const events = [...earlier, event];
  const notes: string[] = [];
  const after = await fs.read(rtmrPath).catch(() => undefined);
  if (before?.length === RTMR_BYTES && after !== undefined) {
    const expected = createHash('sha384').update(before).update(digest).digest();
    if (!expected.equals(Buffer.from(after))) notes.push(`RTMR3 read back as ${Buffer.from(after).toString('hex')}, not SHA-384(before || digest): something else extended it at the same time, and the replay will not match`);
  }
  try {
    await nodeFs.mkdir(dirname(logPath), { recursive: true });
    await nodeFs.writeFile(logPath, JSON.stringify(events) + '\n');
  } catch (err) {
    notes.push(`the event could not be saved to ${logPath} (${errCode(err)}): after a restart of Sigil in this VM, RTMR3 will not replay`);
  }
  return log(events, true, notes.length === 0 ? null : notes.join('; '));
}
