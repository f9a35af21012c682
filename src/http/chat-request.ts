import type { Catalogue, CatalogueModel } from '../catalogue/catalogue.ts';
import type { Endpoint } from '../catalogue/schema.ts';
import { httpError } from '../protocol/errors.ts';
import { editJsonObject, scanJsonObject, type ObjectScan } from '../protocol/json-edit.ts';

/** What Sigil needs to know about a chat request; everything else passes through untouched. */
export interface ChatRequest {
  body: Record<string, unknown>;
  /** Where the body's top-level members sit in the client's bytes, for byte-exact edits. */
  scan: ObjectScan;
  model: CatalogueModel;
  stream: boolean;
  region: string | undefined;
}

const CHECKED_ROLES = new Set(['system', 'user', 'assistant']);

export interface JsonBody {
  body: Record<string, unknown>;
  scan: ObjectScan;
}

/**
 * The client's JSON object, and where its members sit. A key twice in one object is refused: Sigil
 * reads the last copy, an engine may read the first, and the two would disagree about the request.
 */
export function parseJsonBody(bytes: Buffer): JsonBody {
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw httpError('invalid_json', 'The request body is not valid JSON.');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw httpError('invalid_json', 'The request body must be a JSON object.');
  }
  const scan = scanJsonObject(bytes);
  if (scan.duplicate !== undefined) {
    throw httpError(
      'duplicate_key',
      `The key '${scan.duplicate.key}' appears twice in one object of the request body; send each key once.`,
      scan.duplicate.path,
    );
  }
  return { body: body as Record<string, unknown>, scan };
}

function checkMessages(messages: unknown): void {
  if (messages === undefined) throw httpError('missing_required_parameter', "Missing required parameter: 'messages'.", 'messages');
  if (!Array.isArray(messages) || messages.length === 0) {
    throw httpError('invalid_value', "'messages' must be a non-empty array.", 'messages');
  }
  messages.forEach((message: unknown, i) => {
    const at = `messages[${i}]`;
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      throw httpError('invalid_value', `'${at}' must be an object with 'role' and 'content'.`, at);
    }
    const { role, content } = message as { role?: unknown; content?: unknown };
    if (typeof role !== 'string' || role === '') {
      throw httpError('invalid_value', `'${at}.role' must be a non-empty string.`, `${at}.role`);
    }
    if (CHECKED_ROLES.has(role)) {
      const ok = typeof content === 'string' || Array.isArray(content) || (role === 'assistant' && (content === null || content === undefined));
      if (!ok) throw httpError('invalid_value', `'${at}.content' must be a string.`, `${at}.content`);
    }
  });
}

function checkOptional(body: Record<string, unknown>, model: CatalogueModel): void {
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') {
    throw httpError('invalid_value', "'stream' must be a boolean.", 'stream');
  }
  const t = body.temperature;
  if (t !== undefined && t !== null && (typeof t !== 'number' || !Number.isFinite(t) || t < 0 || t > 2)) {
    throw httpError('invalid_value', "'temperature' must be a number from 0 to 2.", 'temperature');
  }
  for (const field of ['max_tokens', 'max_completion_tokens'] as const) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
      throw httpError('invalid_value', `'${field}' must be a positive integer.`, field);
    }
    if (v > model.context_window) {
      throw httpError('invalid_value', `'${field}' is ${v}, more than the ${model.context_window}-token context window of '${model.id}'.`, field);
    }
  }
  if (body.region !== undefined && (typeof body.region !== 'string' || body.region === '')) {
    throw httpError('invalid_value', "'region' must be a non-empty string.", 'region');
  }
}

/** What a chat request must hold besides its model: messages, and the fields Sigil checks. */
export function checkChatFields(body: Record<string, unknown>, model: CatalogueModel): void {
  checkMessages(body.messages);
  checkOptional(body, model);
}

/**
 * What Sigil reads of a Messages API request besides its model (docs/api.md#anthropic-messages): `max_tokens`, which that API
 * requires, a positive integer within the model's context window; `stream` is checked with every endpoint's fields.
 */
export function checkMessagesFields(body: Record<string, unknown>, model: CatalogueModel): void {
  const v = body.max_tokens;
  if (v === undefined) throw httpError('missing_required_parameter', "Missing required parameter: 'max_tokens'.", 'max_tokens');
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw httpError('invalid_value', "'max_tokens' must be a positive integer.", 'max_tokens');
  if (v > model.context_window) {
    throw httpError('invalid_value', `'max_tokens' is ${v}, more than the ${model.context_window}-token context window of '${model.id}'.`, 'max_tokens');
  }
}

/** The fields every endpoint's request shares: `stream` and Sigil's own `region`. */
function checkCommonFields(body: Record<string, unknown>): void {
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') {
    throw httpError('invalid_value', "'stream' must be a boolean.", 'stream');
  }
  if (body.region !== undefined && (typeof body.region !== 'string' || body.region === '')) {
    throw httpError('invalid_value', "'region' must be a non-empty string.", 'region');
  }
}

/**
 * docs/api.md#chat-completions: checks the fields Sigil owns (the model, known and serving this endpoint; for chat
 * its messages and limits); other fields are the engine's business.
 */
export function validateRequest(
  { body, scan }: JsonBody,
  catalogue: Catalogue,
  endpoint: { kind: Endpoint; path: string; checkFields(body: Record<string, unknown>, model: CatalogueModel): void },
): ChatRequest {
  const id = body.model;
  if (id === undefined) throw httpError('missing_required_parameter', "Missing required parameter: 'model'.", 'model');
  if (typeof id !== 'string') throw httpError('invalid_value', "'model' must be a string.", 'model');
  if (endpoint.kind === 'chat') checkMessages(body.messages);
  const model = catalogue.byId.get(id);
  if (model === undefined) {
    throw httpError('model_not_found', `The model '${id}' does not exist or you do not have access to it.`, 'model');
  }
  if (!model.endpoints.includes(endpoint.kind)) {
    throw httpError('model_not_supported', `The model '${id}' is not served on ${endpoint.path}; it serves: ${model.endpoints.join(', ')}.`, 'model');
  }
  checkCommonFields(body);
  endpoint.checkFields(body, model);
  return { body, scan, model, stream: body.stream === true, region: body.region as string | undefined };
}

/** Fields of Sigil's own (docs/api.md#chat-completions) that the engine never sees. */
const EXTENSION_FIELDS = ['region'] as const;

/**
 * The bytes the engine receives: the client's own bytes when nothing needs rewriting; otherwise the
 * same bytes with only the `model` value replaced by the engine's name and Sigil's extension fields
 * cut out, so every other byte (numbers above 2^53, 1e999, -0.0, whitespace) reaches the engine as sent.
 */
export function upstreamBody(raw: Buffer, request: ChatRequest): Buffer {
  const rename = request.model.upstream_model !== request.model.id;
  const extensions = EXTENSION_FIELDS.filter((name) => name in request.body);
  if (!rename && extensions.length === 0) return raw;
  return editJsonObject(raw, request.scan, { set: rename ? { model: JSON.stringify(request.model.upstream_model) } : {}, remove: extensions });
}
