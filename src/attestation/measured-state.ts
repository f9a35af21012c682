/**
 * The measured state of a running Sigil: the manifest in force and the runtime events that name it. Start records the
 * first event; every reload measures the new state and records an event before that state may serve.
 */
import type { LoadedConfig } from '../config/load.ts';
import type { MeasuredModel } from '../catalogue/weights.ts';
import type { Logger } from '../logger/logger.ts';
import type { EvidenceSources } from './document.ts';
import { codeOutsideArtifact } from './artifact-refusals.ts';
import { manifestDigest, manifestOfConfig, runningCode } from './manifest.ts';
import type { ProcessRuntime } from './runtime-options.ts';
import { unmeasuredRuntimeOptions } from './runtime-options.ts';
import { MeasurementError, RuntimeEventLog, type RtmrFs } from './self-measurement.ts';
import { SigilError } from '../protocol/sigil-error.ts';

export interface MeasuredState {
  events: RuntimeEventLog;
  runtime: ProcessRuntime;
  /** The manifest text (JCS) in force: the one the last event names. */
  manifest: string;
  /** For tests: the code folder measured instead of the running one. */
  codeDir?: string;
}

/** Why Sigil will not start on a hardware TEE: a runtime option would run code the measurement does not name. */
export class UnmeasuredRuntimeError extends SigilError<'ERR_UNMEASURED_RUNTIME'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_UNMEASURED_RUNTIME', message, options);
  }
}

export function refuseUnmeasuredRuntime(runtime: ProcessRuntime, tee: string): void {
  const found = [...unmeasuredRuntimeOptions(runtime), ...codeOutsideArtifact(runningCode(), runtime.env)];
  if (found.length === 0) return;
  throw new UnmeasuredRuntimeError(
    `refusing to start on ${tee}: ${found.join(', ')} would run code or open a debugger the measurement does not cover, so the evidence would not name what handles prompts. Start Sigil without it.`,
  );
}

export interface StartMeasurement {
  config: LoadedConfig;
  /** SHA-256 of the catalogue bytes parsed for this start (null for the built-in engine's own catalogue). */
  catalogueSha256: string | null;
  runtime: ProcessRuntime;
  /** `none`: no hardware; the manifest is computed and reported all the same, vouched for by nothing. */
  tee: 'tdx' | 'sev-snp' | 'none';
  models: MeasuredModel[];
  policyHash: string;
  logger: Logger;
  rtmrFs?: RtmrFs;
  codeDir?: string;
}

/** Measures the state at start and records its event; an RTMR3 that refuses the event is logged and said in the document, not fatal. */
export async function measureStart(m: StartMeasurement): Promise<{ state: MeasuredState; manifestSha384: string }> {
  const a = m.config.attestation;
  const events = await RuntimeEventLog.open(m.tee, {
    rtmrPath: a.rtmr_path,
    ccelTablePath: a.ccel_table_path,
    ccelDataPath: a.ccel_data_path,
    runtimeLogPath: a.runtime_log_path,
    ...(m.rtmrFs === undefined ? {} : { fs: m.rtmrFs }),
  });
  const { sha384, text } = manifestDigest(await manifestOfConfig(m.config, m.catalogueSha256, m.runtime, m.models, m.codeDir));
  try {
    const event = await events.record({ reason: 'start', manifestSha384: sha384, policyHash: m.policyHash });
    const { reason } = events.eventLog().self_measurement;
    if (m.tee === 'none')
      m.logger.info({ manifest_sha384: sha384 }, 'Sigil computed its manifest (no hardware: reported in the document, vouched for by nothing)');
    else if (m.tee !== 'tdx') m.logger.info({ manifest_sha384: sha384, event: event.digest }, 'Sigil measured its manifest (bound through the report data)');
    else if (reason !== null) m.logger.warn({ digest: event.digest, manifest_sha384: sha384, reason }, 'Sigil measured itself into RTMR3, with a problem');
    else m.logger.info({ digest: event.digest, manifest_sha384: sha384, rtmr_path: a.rtmr_path }, 'Sigil measured itself into RTMR3');
  } catch (err) {
    if (!(err instanceof MeasurementError)) throw err;
    m.logger.warn({ reason: err.message }, 'Sigil could not measure itself into RTMR3');
  }
  if (m.tee === 'tdx' && events.eventLog().ccel_data === null)
    m.logger.warn({ ccel_data_path: a.ccel_data_path }, 'no CCEL event log: verifiers cannot replay RTMR0-2');
  return { state: { events, runtime: m.runtime, manifest: text, ...(m.codeDir === undefined ? {} : { codeDir: m.codeDir }) }, manifestSha384: sha384 };
}

/**
 * Measures a reloaded state and records its event, then updates what fresh documents state. Throws MeasurementError
 * when it cannot: the caller keeps the old state serving.
 */
export async function measureReload(
  state: MeasuredState,
  sources: EvidenceSources,
  config: LoadedConfig,
  catalogueSha256: string | null,
  models: MeasuredModel[],
  policyHash: string,
): Promise<string> {
  let sha384: string;
  let text: string;
  try {
    ({ sha384, text } = manifestDigest(await manifestOfConfig(config, catalogueSha256, state.runtime, models, state.codeDir)));
  } catch (err) {
    throw new MeasurementError(`the new state cannot be measured (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  await state.events.record({ reason: 'reload', manifestSha384: sha384, policyHash });
  sources.eventLog = state.events.eventLog();
  sources.manifestSha384 = sha384;
  state.manifest = text;
  return sha384;
}
