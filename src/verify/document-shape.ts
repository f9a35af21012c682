/**
 * The attestation document's shape, held strictly before anything in it is believed (docs/verify.md, "What a
 * verifier reads"): a field this verifier does not know is refused rather than ignored, since it may be a claim the
 * service makes that no check here weighs; and every list has a ceiling, so a document cannot make the verifier
 * check a million GPUs. JWK members are the exception: RFC 7517 section 4 says unknown ones are ignored.
 */

/** An HGX board carries 8 GPUs; 64 leaves room for any machine one enclave can own. */
export const MAX_GPU_EVIDENCE = 64;
/** One runtime event at start and one per reload: 4096 reloads is years of weekly ones. */
export const MAX_RUNTIME_EVENTS = 4096;
/** A receipt key and the keys of a rotation or a fleet. */
export const MAX_JWKS_KEYS = 64;

const DOCUMENT_FIELDS = ['version', 'tee', 'measurement', 'nonce', 'binding', 'report_data', 'evidence', 'event_log', 'gpu_evidence'];
const BINDING_FIELDS = [
  'jwks',
  'policy_hash',
  'tls_spki_sha256',
  'hpke_key_config',
  'gpu_evidence_sha256',
  'manifest_sha384',
  'key_origin',
  'runtime_events_sha384',
  'transparency_log',
];
const KEY_ORIGIN_FIELDS = ['receipt', 'tls', 'hpke', 'log'];
const ONE_KEY_ORIGIN_FIELDS = ['origin', 'file', 'bound_to'];
const TRANSPARENCY_LOG_FIELDS = ['origin', 'vkey'];
const EVENT_LOG_FIELDS = ['ccel_table', 'ccel_data', 'runtime_events', 'self_measurement'];
const SELF_MEASUREMENT_FIELDS = ['extended', 'reason'];
const RUNTIME_EVENT_FIELDS = ['imr', 'event', 'digest', 'payload'];
const GPU_EVIDENCE_FIELDS = ['index', 'arch', 'report', 'certificates', 'nonce'];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The first member of `value` not in `known`, named with its path; undefined when every member is known (or `value` is no object). */
function unknownField(value: unknown, known: readonly string[], path: string): string | undefined {
  if (!isObject(value)) return undefined;
  const extra = Object.keys(value).find((name) => !known.includes(name));
  return extra === undefined
    ? undefined
    : `${path}${path === '' ? '' : '.'}${extra} is not a field of the attestation document version 2: this verifier refuses what it cannot weigh`;
}

function tooLong(value: unknown, max: number, path: string, what: string): string | undefined {
  if (!Array.isArray(value) || value.length <= max) return undefined;
  return `${path} lists ${value.length} ${what}, more than the ${max} this verifier accepts`;
}

function eachOf(value: unknown, check: (item: unknown, index: number) => string | undefined): string | undefined {
  if (!Array.isArray(value)) return undefined;
  for (const [index, item] of value.entries()) {
    const problem = check(item, index);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function keyOriginProblem(origins: unknown): string | undefined {
  const path = 'binding.key_origin';
  return (
    unknownField(origins, KEY_ORIGIN_FIELDS, path) ??
    (isObject(origins)
      ? KEY_ORIGIN_FIELDS.map((key) => unknownField(origins[key], ONE_KEY_ORIGIN_FIELDS, `${path}.${key}`)).find((p) => p !== undefined)
      : undefined)
  );
}

function bindingProblem(binding: unknown): string | undefined {
  if (!isObject(binding)) return undefined;
  return (
    unknownField(binding, BINDING_FIELDS, 'binding') ??
    tooLong(isObject(binding.jwks) ? binding.jwks.keys : undefined, MAX_JWKS_KEYS, 'binding.jwks.keys', 'keys') ??
    tooLong(binding.gpu_evidence_sha256, MAX_GPU_EVIDENCE, 'binding.gpu_evidence_sha256', 'GPU reports') ??
    tooLong(binding.runtime_events_sha384, MAX_RUNTIME_EVENTS, 'binding.runtime_events_sha384', 'runtime events') ??
    keyOriginProblem(binding.key_origin) ??
    unknownField(binding.transparency_log, TRANSPARENCY_LOG_FIELDS, 'binding.transparency_log')
  );
}

function eventLogProblem(log: unknown): string | undefined {
  if (!isObject(log)) return undefined;
  return (
    unknownField(log, EVENT_LOG_FIELDS, 'event_log') ??
    unknownField(log.self_measurement, SELF_MEASUREMENT_FIELDS, 'event_log.self_measurement') ??
    tooLong(log.runtime_events, MAX_RUNTIME_EVENTS, 'event_log.runtime_events', 'runtime events') ??
    eachOf(log.runtime_events, (event, i) => unknownField(event, RUNTIME_EVENT_FIELDS, `event_log.runtime_events[${i}]`))
  );
}

/**
 * Why the attestation document's shape is refused (an unknown field, a list past its ceiling), in one sentence; or
 * undefined when it keeps to version 2's fields. Types and values are checked where each field is read.
 */
export function attestationDocumentShapeProblem(doc: unknown): string | undefined {
  if (!isObject(doc)) return undefined;
  return (
    unknownField(doc, DOCUMENT_FIELDS, '') ??
    bindingProblem(doc.binding) ??
    eventLogProblem(doc.event_log) ??
    tooLong(doc.gpu_evidence, MAX_GPU_EVIDENCE, 'gpu_evidence', 'GPU reports') ??
    eachOf(doc.gpu_evidence, (entry, i) => unknownField(entry, GPU_EVIDENCE_FIELDS, `gpu_evidence[${i}]`))
  );
}
