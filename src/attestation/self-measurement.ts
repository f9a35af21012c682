/**
 * Sigil measures itself into TDX RTMR3 (docs/attestation.md): at start, and at every reload, it extends RTMR3 with an
 * event naming the manifest in force and the policy hash, and publishes the events (and the CCEL boot log) in the
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
import { dirname } from 'node:path';
import { canonicalJson } from '../protocol/jcs.ts';
import { RUNTIME_EVENT_KIND, RUNTIME_EVENT_NAME, type EventLog, type RuntimeEvent, type RuntimeEventPayload } from '../protocol/attestation.ts';
import { SigilError } from '../protocol/sigil-error.ts';

export const DEFAULT_RTMR3_PATH = '/sys/class/misc/tdx_guest/measurements/rtmr3:sha384';
export const DEFAULT_CCEL_TABLE_PATH = '/sys/firmware/acpi/tables/CCEL';
export const DEFAULT_CCEL_DATA_PATH = '/sys/firmware/acpi/tables/data/CCEL';
export const DEFAULT_RUNTIME_LOG_PATH = '/run/sigil/rtmr-events.json';

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

/** The exact payload text of a runtime event: canonical JSON (JCS), so anyone can recompute its SHA-384. */
export function runtimeEventPayload(payload: Omit<RuntimeEventPayload, 'kind'>): string {
  return canonicalJson({ kind: RUNTIME_EVENT_KIND, ...payload });
}

/** The RTMR3 event for a payload: digest = SHA-384 of the payload's UTF-8. */
export function runtimeEvent(payload: string): RuntimeEvent {
  return { imr: 3, event: RUNTIME_EVENT_NAME, digest: createHash('sha384').update(payload, 'utf8').digest('hex'), payload };
}

export interface SelfMeasurementOptions {
  rtmrPath?: string;
  ccelTablePath?: string;
  ccelDataPath?: string;
  runtimeLogPath?: string;
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
  return (
    typeof e === 'object' &&
    e !== null &&
    Number.isInteger(e.imr) &&
    typeof e.event === 'string' &&
    typeof e.digest === 'string' &&
    typeof e.payload === 'string'
  );
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

function refusal(path: string, err: unknown): string {
  const code = errCode(err);
  if (code === 'ENOENT') return `the kernel exposes no writable RTMR3 (${path} is absent; the TDX guest driver offers it from Linux 6.16)`;
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return `writing RTMR3 (${path}) was refused (${code}): Sigil needs write access to it`;
  return `extending RTMR3 through ${path} failed (${code})`;
}

/** What a new event says: why the state changed, the manifest now in force, and the policy receipts will carry. */
export interface EventInputs {
  reason: RuntimeEventPayload['reason'];
  manifestSha384: string;
  policyHash: string;
  /** Default: now. */
  at?: Date;
}

/** Why an event could not be measured: the state it describes must not serve. */
export class MeasurementError extends SigilError<'ERR_MEASUREMENT'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_MEASUREMENT', message, options);
  }
}

/**
 * Sigil's runtime events and the document's `event_log`. On TDX each event extends RTMR3 before it counts; elsewhere
 * (SEV-SNP, none) the events are only listed, and the binding's `runtime_events_sha384` is what makes them evidence.
 */
export class RuntimeEventLog {
  private constructor(
    private readonly tdx: boolean,
    private readonly opts: SelfMeasurementOptions,
    private readonly ccel: { table: string | null; data: string | null },
    private events: RuntimeEvent[],
    private readonly earlier: number,
    private status: EventLog['self_measurement'],
  ) {}

  /** Opens the log: on TDX it reads the CCEL and the events earlier starts of Sigil extended in this VM. */
  static async open(tee: 'tdx' | 'sev-snp' | 'none', opts: SelfMeasurementOptions = {}): Promise<RuntimeEventLog> {
    if (tee !== 'tdx') {
      const reason =
        tee === 'sev-snp'
          ? 'SEV-SNP has no runtime measurement register: the events are bound through the report data (binding.runtime_events_sha384)'
          : 'no hardware: the events are listed, not measured';
      return new RuntimeEventLog(false, opts, { table: null, data: null }, [], 0, { extended: false, reason });
    }
    const [table, data] = await Promise.all([
      readBase64OrNull(opts.ccelTablePath ?? DEFAULT_CCEL_TABLE_PATH),
      readBase64OrNull(opts.ccelDataPath ?? DEFAULT_CCEL_DATA_PATH),
    ]);
    const earlier = await readRuntimeLog(opts.runtimeLogPath ?? DEFAULT_RUNTIME_LOG_PATH);
    if (typeof earlier === 'string')
      return new RuntimeEventLog(true, opts, { table, data }, [], -1, {
        extended: false,
        reason: `${earlier}, so RTMR3 could not be explained after one more event: ${WHY_IT_MATTERS}`,
      });
    return new RuntimeEventLog(true, opts, { table, data }, earlier, earlier.length, { extended: false, reason: 'no event recorded yet' });
  }

  /** The events this process recorded (after those of earlier starts in the VM). */
  get ownEvents(): RuntimeEvent[] {
    return this.events.slice(Math.max(this.earlier, 0));
  }

  get seq(): number {
    return this.ownEvents.length;
  }

  /** The document's `event_log`: every event in order, and whether the last could be measured. */
  eventLog(): EventLog {
    return { ccel_table: this.ccel.table, ccel_data: this.ccel.data, runtime_events: [...this.events], self_measurement: { ...this.status } };
  }

  /**
   * Records one event. On TDX it extends RTMR3 first and throws MeasurementError when it cannot; at start the caller
   * may serve anyway (the document then says why), a reload must not. Elsewhere it is appended as is.
   */
  async record(inputs: EventInputs): Promise<RuntimeEvent> {
    const event = runtimeEvent(
      runtimeEventPayload({
        seq: this.seq,
        reason: inputs.reason,
        at: (inputs.at ?? new Date()).toISOString(),
        manifest_sha384: inputs.manifestSha384,
        policy_hash: inputs.policyHash,
      }),
    );
    if (!this.tdx) {
      this.events = [...this.events, event];
      return event;
    }
    if (this.earlier < 0) throw new MeasurementError(this.status.reason ?? 'the runtime log is unreadable');
    const fs = this.opts.fs ?? nodeRtmrFs;
    const rtmrPath = this.opts.rtmrPath ?? DEFAULT_RTMR3_PATH;
    const logPath = this.opts.runtimeLogPath ?? DEFAULT_RUNTIME_LOG_PATH;
    const digest = new Uint8Array(Buffer.from(event.digest, 'hex'));
    const before = await fs.read(rtmrPath).catch(() => undefined);
    try {
      await fs.extend(rtmrPath, digest);
    } catch (err) {
      const reason = `${refusal(rtmrPath, err)}: ${WHY_IT_MATTERS}`;
      if (this.seq === 0) this.status = { extended: false, reason };
      throw new MeasurementError(reason);
    }
    this.events = [...this.events, event];
    const notes: string[] = [];
    const after = await fs.read(rtmrPath).catch(() => undefined);
    if (before?.length === RTMR_BYTES && after !== undefined) {
      const expected = createHash('sha384').update(before).update(digest).digest();
      if (!expected.equals(Buffer.from(after)))
        notes.push(
          `RTMR3 read back as ${Buffer.from(after).toString('hex')}, not SHA-384(before || digest): something else extended it at the same time, and the replay will not match`,
        );
    }
    try {
      await nodeFs.mkdir(dirname(logPath), { recursive: true });
      await nodeFs.writeFile(logPath, JSON.stringify(this.events) + '\n');
    } catch (err) {
      notes.push(`the event could not be saved to ${logPath} (${errCode(err)}): after a restart of Sigil in this VM, RTMR3 will not replay`);
    }
    this.status = { extended: true, reason: notes.length === 0 ? null : notes.join('; ') };
    return event;
  }
}
