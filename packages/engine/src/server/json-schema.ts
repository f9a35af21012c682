import { randomBytes } from 'node:crypto';
import type { GbnfJsonSchema } from 'node-llama-cpp';
import { invalidRequest } from './errors.ts';
import { EMAIL_GBNF, integerRange, KNOWN_EMAIL_PATTERNS, type GrammarLeaf, type GrammarSchema } from './grammar-leaves.ts';
import { isObject } from './request-fields.ts';

/**
 * A client's JSON Schema (from `response_format` or a tool's `parameters`) as the grammar
 * node-llama-cpp compiles for llama.cpp's sampler, so that every token sampled keeps the output
 * valid. The grammar enforces a subset of JSON Schema; a keyword outside it would be dropped
 * silently by the compiler and the output could break the schema the client relies on, so it is
 * refused here with a 400 naming where it is. Annotations (title, description, ...) are accepted
 * and change nothing. Objects are generated with every listed property and, as in vLLM's default
 * (xgrammar) strict mode, no property the schema does not list unless `additionalProperties` says so.
 * Sigil writes the grammar of what node-llama-cpp cannot bound itself (grammar-leaves.ts): integers
 * within `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum`, numbers within them (decoded as
 * whole numbers), and `format: "email"` (with or without the email pattern zod writes beside it).
 */

const ANNOTATIONS = new Set(['title', 'description', '$schema', '$id', '$comment', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly', 'required']);
const SIMPLE_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null']);
const STRING_FORMATS = new Set(['date-time', 'date', 'time']);
const KEYWORDS: Record<string, ReadonlySet<string>> = {
  string: new Set(['type', 'minLength', 'maxLength', 'format', 'pattern']),
  number: new Set(['type', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']),
  object: new Set(['type', 'properties', 'additionalProperties', 'minProperties', 'maxProperties']),
  array: new Set(['type', 'items', 'prefixItems', 'minItems', 'maxItems']),
  simple: new Set(['type']),
};
const DEFINITIONS = ['$defs', 'definitions'] as const;
const COMBINATORS = ['$ref', 'const', 'enum', 'anyOf', 'oneOf', 'allOf'] as const;

/** What the conversion carries along: the names $ref may point at, and the leaves Sigil writes itself. */
interface Conversion {
  names: ReadonlySet<string>;
  leaves: GrammarLeaf[];
  nonce: string;
}

export function toGrammarSchema(schema: unknown, param: string): GrammarSchema {
  const leaves: GrammarLeaf[] = [];
  return { schema: toSchema(schema, param, leaves), leaves };
}

function toSchema(schema: unknown, param: string, leaves: GrammarLeaf[]): GbnfJsonSchema {
  if (!isObject(schema)) throw invalidRequest(`${param} must be a JSON Schema object.`, param);
  const lists: Array<[string, Record<string, unknown>]> = [];
  for (const key of DEFINITIONS) {
    const list = schema[key];
    if (list === undefined) continue;
    if (!isObject(list)) throw invalidRequest(`${param}.${key} must be an object of schemas.`, `${param}.${key}`);
    lists.push([key, list]);
  }
  const ctx: Conversion = { names: new Set(lists.flatMap(([, list]) => Object.keys(list))), leaves, nonce: randomBytes(6).toString('hex') };
  const defs: Record<string, GbnfJsonSchema> = {};
  for (const [key, list] of lists) {
    for (const [name, def] of Object.entries(list)) defs[name] = convert(def, `${param}.${key}.${name}`, ctx);
  }
  const { $defs: _a, definitions: _b, ...root } = schema;
  const converted = convert(root, param, ctx);
  if (Object.keys(defs).length === 0) return converted;
  // node-llama-cpp resolves `#/$defs/NAME` from the enclosing objects, arrays and oneOfs that carry $defs.
  const type = (converted as { type?: unknown }).type;
  if (type === 'object' || type === 'array' || 'oneOf' in converted) return { ...converted, $defs: defs } as GbnfJsonSchema;
  return { oneOf: [converted], $defs: defs } as GbnfJsonSchema;
}

function convert(schema: unknown, param: string, ctx: Conversion): GbnfJsonSchema {
  if (schema === true || (isObject(schema) && Object.keys(schema).every((key) => ANNOTATIONS.has(key)))) {
    throw invalidRequest(`${param} allows any value; the engine can only constrain output to a schema with a type, enum, const or anyOf.`, param);
  }
  if (!isObject(schema)) throw invalidRequest(`${param} must be a JSON Schema object.`, param);
  const combinator = COMBINATORS.find((key) => schema[key] !== undefined);
  if (combinator === undefined) return typed(schema, param, ctx);
  // Beside a reference, a value list or alternatives, only annotations and `type` may stand: anything else would be dropped.
  checkKeywords(schema, new Set([combinator, 'type']), param);
  const value = schema[combinator];
  switch (combinator) {
    case '$ref':
      if (typeof value !== 'string') throw invalidRequest(`${param}.$ref must be a string.`, `${param}.$ref`);
      return { $ref: refName(value, param, ctx.names) } as GbnfJsonSchema;
    case 'const':
      return { const: scalar(value, `${param}.const`) };
    case 'enum':
      if (!Array.isArray(value) || value.length === 0) throw invalidRequest(`${param}.enum must be a non-empty array.`, `${param}.enum`);
      return { enum: value.map((v, i) => scalar(v, `${param}.enum[${i}]`)) };
    case 'anyOf':
    case 'oneOf':
      if (!Array.isArray(value) || value.length === 0)
        throw invalidRequest(`${param}.${combinator} must be a non-empty array of schemas.`, `${param}.${combinator}`);
      return { oneOf: value.map((option, i) => convert(option, `${param}.${combinator}[${i}]`, ctx)) };
    case 'allOf':
      // pydantic writes a described reference as {"allOf": [{"$ref": ...}], "description": ...}.
      if (!Array.isArray(value) || value.length !== 1) throw unsupported('allOf with more than one schema', `${param}.allOf`);
      return convert(value[0], `${param}.allOf[0]`, ctx);
  }
}

function typed(schema: Record<string, unknown>, param: string, ctx: Conversion): GbnfJsonSchema {
  const { type } = schema;
  if (Array.isArray(type)) {
    if (type.length === 0 || !type.every((t) => typeof t === 'string' && SIMPLE_TYPES.has(t))) {
      throw unsupported('a type list with object, array or unknown types (use anyOf)', `${param}.type`);
    }
    checkKeywords(schema, KEYWORDS.simple!, param);
    return { type: type as Array<'string' | 'number' | 'integer' | 'boolean' | 'null'> };
  }
  if (type === 'string') {
    checkKeywords(schema, KEYWORDS.string!, param);
    if (schema.format === 'email') {
      if (schema.pattern !== undefined && !KNOWN_EMAIL_PATTERNS.has(schema.pattern as string))
        throw unsupported('a pattern beside format "email" other than the email patterns zod writes', `${param}.pattern`);
      if (schema.minLength !== undefined || schema.maxLength !== undefined) throw unsupported('a length bound beside format', `${param}.format`);
      return leaf(ctx, EMAIL_GBNF, { type: 'string' });
    }
    if (schema.pattern !== undefined) {
      throw unsupported(
        'a pattern (only format "email" with its usual pattern is; describe the string with enum, format or length bounds)',
        `${param}.pattern`,
      );
    }
    if (schema.format !== undefined) {
      if (typeof schema.format !== 'string' || !STRING_FORMATS.has(schema.format))
        throw unsupported(`format ${JSON.stringify(schema.format)} (date-time, date, time and email are)`, `${param}.format`);
      if (schema.minLength !== undefined || schema.maxLength !== undefined) throw unsupported('a length bound beside format', `${param}.format`);
      return { type: 'string', format: schema.format as 'date-time' | 'date' | 'time' };
    }
    return { type: 'string', ...bound(schema, 'minLength', param), ...bound(schema, 'maxLength', param) };
  }
  if (type === 'object') {
    checkKeywords(schema, KEYWORDS.object!, param);
    const properties: Record<string, GbnfJsonSchema> = {};
    if (schema.properties !== undefined) {
      if (!isObject(schema.properties)) throw invalidRequest(`${param}.properties must be an object of schemas.`, `${param}.properties`);
      for (const [name, property] of Object.entries(schema.properties)) properties[name] = convert(property, `${param}.properties.${name}`, ctx);
    }
    const required = schema.required;
    if (required !== undefined && (!Array.isArray(required) || required.some((name) => typeof name !== 'string' || !Object.hasOwn(properties, name)))) {
      throw unsupported('required properties that properties does not describe', `${param}.required`);
    }
    const extra = schema.additionalProperties;
    const additionalProperties = extra === undefined || typeof extra === 'boolean' ? extra : convert(extra, `${param}.additionalProperties`, ctx);
    return {
      type: 'object',
      properties,
      ...(additionalProperties === undefined ? {} : { additionalProperties }),
      ...bound(schema, 'minProperties', param),
      ...bound(schema, 'maxProperties', param),
    } as GbnfJsonSchema;
  }
  if (type === 'array') {
    checkKeywords(schema, KEYWORDS.array!, param);
    const items = schema.items === undefined ? undefined : convert(schema.items, `${param}.items`, ctx);
    const prefix = schema.prefixItems;
    if (prefix !== undefined && !Array.isArray(prefix)) throw invalidRequest(`${param}.prefixItems must be an array of schemas.`, `${param}.prefixItems`);
    return {
      type: 'array',
      ...(items === undefined ? {} : { items }),
      ...(prefix === undefined ? {} : { prefixItems: prefix.map((p, i) => convert(p, `${param}.prefixItems[${i}]`, ctx)) }),
      ...bound(schema, 'minItems', param),
      ...bound(schema, 'maxItems', param),
    } as GbnfJsonSchema;
  }
  if (type === 'integer' || type === 'number') {
    checkKeywords(schema, KEYWORDS.number!, param);
    const range = numberRange(schema, param);
    return range === undefined ? { type } : leaf(ctx, integerRange(range.min, range.max), { type });
  }
  if (typeof type === 'string' && SIMPLE_TYPES.has(type)) {
    checkKeywords(schema, KEYWORDS.simple!, param);
    return { type: type as 'number' | 'integer' | 'boolean' | 'null' };
  }
  if (type === undefined) throw invalidRequest(`${param} needs a type, enum, const, anyOf or $ref.`, param);
  throw invalidRequest(`${param}.type ${JSON.stringify(type)} is not a JSON Schema type.`, `${param}.type`);
}

function leaf(ctx: Conversion, gbnf: string, shown: GbnfJsonSchema): GbnfJsonSchema {
  const placeholder = `sigil-leaf-${ctx.nonce}-${ctx.leaves.length}`;
  ctx.leaves.push({ placeholder, gbnf, shown });
  return { const: placeholder };
}

/**
 * The whole numbers a bounded integer or number may take (a bounded number is decoded as a whole
 * number: always valid for its schema), or undefined when it has no bound. A bound past the safe
 * integers is read as the largest safe integer.
 */
function numberRange(schema: Record<string, unknown>, param: string): { min: number; max: number } | undefined {
  const read = (key: string): number | undefined => {
    const value = schema[key];
    if (value === undefined) return undefined;
    if (typeof value !== 'number' || !Number.isFinite(value)) throw invalidRequest(`${param}.${key} must be a number.`, `${param}.${key}`);
    return value;
  };
  const [minimum, maximum, exclusiveMinimum, exclusiveMaximum] = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'].map(read);
  if ([minimum, maximum, exclusiveMinimum, exclusiveMaximum].every((bound) => bound === undefined)) return undefined;
  const lows = [minimum === undefined ? -Infinity : Math.ceil(minimum), exclusiveMinimum === undefined ? -Infinity : Math.floor(exclusiveMinimum) + 1];
  const highs = [maximum === undefined ? Infinity : Math.floor(maximum), exclusiveMaximum === undefined ? Infinity : Math.ceil(exclusiveMaximum) - 1];
  const min = Math.max(Math.max(...lows), Number.MIN_SAFE_INTEGER);
  const max = Math.min(Math.min(...highs), Number.MAX_SAFE_INTEGER);
  if (min > max) throw invalidRequest(`${param} allows no whole number between its bounds; the engine decodes bounded numbers as whole numbers.`, param);
  return { min, max };
}

function checkKeywords(schema: Record<string, unknown>, allowed: ReadonlySet<string>, param: string): void {
  for (const key of Object.keys(schema)) {
    if (!allowed.has(key) && !ANNOTATIONS.has(key)) throw unsupported(`the keyword "${key}" here`, `${param}.${key}`);
  }
}

function bound(schema: Record<string, unknown>, key: string, param: string): Record<string, number> {
  const value = schema[key];
  if (value === undefined) return {};
  if (!Number.isSafeInteger(value) || (value as number) < 0) throw invalidRequest(`${param}.${key} must be a non-negative integer.`, `${param}.${key}`);
  return { [key]: value as number };
}

function scalar(value: unknown, param: string): string | number | boolean | null {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return value as string | number | boolean | null;
  throw unsupported('an object or array as a const or enum value', param);
}

function refName(ref: string, param: string, names: ReadonlySet<string>): string {
  const match = /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(ref);
  if (match === null) throw unsupported(`the reference ${JSON.stringify(ref)} (only #/$defs/NAME and #/definitions/NAME are)`, `${param}.$ref`);
  if (!names.has(match[1]!)) throw invalidRequest(`${param}.$ref names ${JSON.stringify(match[1])}, which the schema does not define.`, `${param}.$ref`);
  return `#/$defs/${match[1]}`;
}

function unsupported(what: string, param: string) {
  return invalidRequest(`The engine cannot enforce ${what} in a JSON Schema, so it refuses the schema rather than return output that may not match it.`, param);
}
