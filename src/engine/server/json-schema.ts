import type { GbnfJsonSchema } from 'node-llama-cpp';
import { invalidRequest } from './errors.ts';
import { isObject } from './request-fields.ts';

/**
 * A client's JSON Schema (from `response_format` or a tool's `parameters`) as the grammar
 * node-llama-cpp compiles for llama.cpp's sampler, so that every token sampled keeps the output
 * valid. The grammar enforces a subset of JSON Schema; a keyword outside it would be dropped
 * silently by the compiler and the output could break the schema the client relies on, so it is
 * refused here with a 400 naming where it is. Annotations (title, description, ...) are accepted
 * and change nothing. Objects are generated with every listed property and, as in vLLM's default
 * (xgrammar) strict mode, no property the schema does not list unless `additionalProperties` says so.
 */

const ANNOTATIONS = new Set(['title', 'description', '$schema', '$id', '$comment', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly', 'required']);
const SIMPLE_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null']);
const STRING_FORMATS = new Set(['date-time', 'date', 'time']);
const KEYWORDS: Record<string, ReadonlySet<string>> = {
  string: new Set(['type', 'minLength', 'maxLength', 'format']),
  object: new Set(['type', 'properties', 'additionalProperties', 'minProperties', 'maxProperties']),
  array: new Set(['type', 'items', 'prefixItems', 'minItems', 'maxItems']),
  simple: new Set(['type']),
};
const DEFINITIONS = ['$defs', 'definitions'] as const;
const COMBINATORS = ['$ref', 'const', 'enum', 'anyOf', 'oneOf', 'allOf'] as const;

export function toGrammarSchema(schema: unknown, param: string): GbnfJsonSchema {
  if (!isObject(schema)) throw invalidRequest(`${param} must be a JSON Schema object.`, param);
  const lists: Array<[string, Record<string, unknown>]> = [];
  for (const key of DEFINITIONS) {
    const list = schema[key];
    if (list === undefined) continue;
    if (!isObject(list)) throw invalidRequest(`${param}.${key} must be an object of schemas.`, `${param}.${key}`);
    lists.push([key, list]);
  }
  const names = new Set(lists.flatMap(([, list]) => Object.keys(list)));
  const defs: Record<string, GbnfJsonSchema> = {};
  for (const [key, list] of lists) {
    for (const [name, def] of Object.entries(list)) defs[name] = convert(def, `${param}.${key}.${name}`, names);
  }
  const { $defs: _a, definitions: _b, ...root } = schema;
  const converted = convert(root, param, names);
  if (Object.keys(defs).length === 0) return converted;
  // node-llama-cpp resolves `#/$defs/NAME` from the enclosing objects, arrays and oneOfs that carry $defs.
  const type = (converted as { type?: unknown }).type;
  if (type === 'object' || type === 'array' || 'oneOf' in converted) return { ...converted, $defs: defs } as GbnfJsonSchema;
  return { oneOf: [converted], $defs: defs } as GbnfJsonSchema;
}

function convert(schema: unknown, param: string, names: ReadonlySet<string>): GbnfJsonSchema {
  if (schema === true || (isObject(schema) && Object.keys(schema).every((key) => ANNOTATIONS.has(key)))) {
    throw invalidRequest(`${param} allows any value; the engine can only constrain output to a schema with a type, enum, const or anyOf.`, param);
  }
  if (!isObject(schema)) throw invalidRequest(`${param} must be a JSON Schema object.`, param);
  const combinator = COMBINATORS.find((key) => schema[key] !== undefined);
  if (combinator === undefined) return typed(schema, param, names);
  // Beside a reference, a value list or alternatives, only annotations and `type` may stand: anything else would be dropped.
  checkKeywords(schema, new Set([combinator, 'type']), param);
  const value = schema[combinator];
  switch (combinator) {
    case '$ref':
      if (typeof value !== 'string') throw invalidRequest(`${param}.$ref must be a string.`, `${param}.$ref`);
      return { $ref: refName(value, param, names) } as GbnfJsonSchema;
    case 'const':
      return { const: scalar(value, `${param}.const`) };
    case 'enum':
      if (!Array.isArray(value) || value.length === 0) throw invalidRequest(`${param}.enum must be a non-empty array.`, `${param}.enum`);
      return { enum: value.map((v, i) => scalar(v, `${param}.enum[${i}]`)) };
    case 'anyOf':
    case 'oneOf':
      if (!Array.isArray(value) || value.length === 0)
        throw invalidRequest(`${param}.${combinator} must be a non-empty array of schemas.`, `${param}.${combinator}`);
      return { oneOf: value.map((option, i) => convert(option, `${param}.${combinator}[${i}]`, names)) };
    case 'allOf':
      // pydantic writes a described reference as {"allOf": [{"$ref": ...}], "description": ...}.
      if (!Array.isArray(value) || value.length !== 1) throw unsupported('allOf with more than one schema', `${param}.allOf`);
      return convert(value[0], `${param}.allOf[0]`, names);
  }
}

function typed(schema: Record<string, unknown>, param: string, names: ReadonlySet<string>): GbnfJsonSchema {
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
    if (schema.format !== undefined) {
      if (typeof schema.format !== 'string' || !STRING_FORMATS.has(schema.format))
        throw unsupported(`format ${JSON.stringify(schema.format)} (date-time, date and time are)`, `${param}.format`);
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
      for (const [name, property] of Object.entries(schema.properties)) properties[name] = convert(property, `${param}.properties.${name}`, names);
    }
    const required = schema.required;
    if (required !== undefined && (!Array.isArray(required) || required.some((name) => typeof name !== 'string' || !Object.hasOwn(properties, name)))) {
      throw unsupported('required properties that properties does not describe', `${param}.required`);
    }
    const extra = schema.additionalProperties;
    const additionalProperties = extra === undefined || typeof extra === 'boolean' ? extra : convert(extra, `${param}.additionalProperties`, names);
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
    const items = schema.items === undefined ? undefined : convert(schema.items, `${param}.items`, names);
    const prefix = schema.prefixItems;
    if (prefix !== undefined && !Array.isArray(prefix)) throw invalidRequest(`${param}.prefixItems must be an array of schemas.`, `${param}.prefixItems`);
    return {
      type: 'array',
      ...(items === undefined ? {} : { items }),
      ...(prefix === undefined ? {} : { prefixItems: prefix.map((p, i) => convert(p, `${param}.prefixItems[${i}]`, names)) }),
      ...bound(schema, 'minItems', param),
      ...bound(schema, 'maxItems', param),
    } as GbnfJsonSchema;
  }
  if (typeof type === 'string' && SIMPLE_TYPES.has(type)) {
    checkKeywords(schema, KEYWORDS.simple!, param);
    return { type: type as 'number' | 'integer' | 'boolean' | 'null' };
  }
  if (type === undefined) throw invalidRequest(`${param} needs a type, enum, const, anyOf or $ref.`, param);
  throw invalidRequest(`${param}.type ${JSON.stringify(type)} is not a JSON Schema type.`, `${param}.type`);
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
