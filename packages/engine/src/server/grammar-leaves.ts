import type { GbnfJsonSchema } from 'node-llama-cpp';
import { gbnfLiteral } from './gbnf.ts';

/**
 * Values node-llama-cpp's JSON-schema grammar cannot bound (numbers within `minimum`/`maximum`, an
 * email address), written by Sigil as GBNF. The schema handed to node-llama-cpp holds a placeholder
 * `const` string where such a value goes; the grammar it compiles has that literal replaced by the
 * leaf's own rule.
 */
export interface GrammarLeaf {
  placeholder: string;
  /** A GBNF expression for the JSON value, quotes included for strings. */
  gbnf: string;
  /** What the model is shown of the value in the prompt's tool documentation. */
  shown: GbnfJsonSchema;
}

export interface GrammarSchema {
  schema: GbnfJsonSchema;
  leaves: GrammarLeaf[];
}

/** The schema as the model is shown it: each placeholder back to the plain type of its value. */
export function shownSchema({ schema, leaves }: GrammarSchema): GbnfJsonSchema {
  if (leaves.length === 0) return schema;
  const byPlaceholder = new Map(leaves.map((leaf) => [leaf.placeholder, leaf.shown]));
  return JSON.parse(JSON.stringify(schema), (_key, value: unknown) => {
    const placeholder = (value as { const?: unknown } | null)?.const;
    return typeof placeholder === 'string' && byPlaceholder.has(placeholder) ? byPlaceholder.get(placeholder) : value;
  }) as GbnfJsonSchema;
}

/** A grammar node-llama-cpp compiled for `schema`, with each placeholder literal replaced by its leaf. */
export function withLeaves(grammar: string, leaves: readonly GrammarLeaf[]): string {
  let out = grammar;
  for (const leaf of leaves) {
    const literal = gbnfLiteral(JSON.stringify(leaf.placeholder));
    if (!out.includes(literal)) throw new Error('node-llama-cpp no longer writes a const string as one literal');
    out = out.split(literal).join(`( ${leaf.gbnf} )`);
  }
  return out;
}

/** The JSON integers from `min` to `max` (safe integers, min <= max), without leading zeros or exponents. */
export function integerRange(min: number, max: number): string {
  const parts: string[] = [];
  if (min < 0) parts.push(`"-" ( ${naturalRange(max < 0 ? -max : 1, -min)} )`);
  if (max >= 0) parts.push(naturalRange(Math.max(min, 0), max));
  return parts.map((part) => `( ${part} )`).join(' | ');
}

function naturalRange(lo: number, hi: number): string {
  const alternatives: string[] = [];
  const [loDigits, hiDigits] = [String(lo).length, String(hi).length];
  for (let length = loDigits; length <= hiDigits; length++) {
    const from = length === loDigits ? String(lo) : '1' + '0'.repeat(length - 1);
    const to = length === hiDigits ? String(hi) : '9'.repeat(length);
    alternatives.push(sameLengthRange(from, to));
  }
  return alternatives.map((a) => `( ${a} )`).join(' | ');
}

/** Digit strings of one length from `from` to `to`, digit by digit. */
function sameLengthRange(from: string, to: string): string {
  if (from.length === 0) return '""';
  const [a, b] = [Number(from[0]), Number(to[0])];
  const rest = from.length - 1;
  const anyDigits = rest === 0 ? '' : ` [0-9]{${rest}}`;
  if (a === b) return `"${a}" ( ${sameLengthRange(from.slice(1), to.slice(1))} )`;
  if (/^0*$/.test(from.slice(1)) && /^9*$/.test(to.slice(1))) return `[${a}-${b}]${anyDigits}`;
  const alternatives = [`"${a}" ( ${sameLengthRange(from.slice(1), '9'.repeat(rest))} )`];
  if (b - a > 1) alternatives.push(`[${a + 1}-${b - 1}]${anyDigits}`);
  alternatives.push(`"${b}" ( ${sameLengthRange('0'.repeat(rest), to.slice(1))} )`);
  return alternatives.join(' | ');
}

/**
 * An email address, short enough that any model finishes it: `local@domain.tld`, the local part one or
 * two dot-separated runs of 1 to 16 lowercase letters and digits, one or two domain labels of 1 to 16,
 * a top-level domain of 2 to 6 letters. Every such address matches the HTML and zod email patterns.
 */
export const EMAIL_GBNF = '"\\"" [a-z0-9]{1,16} ( "." [a-z0-9]{1,16} )? "@" ( [a-z0-9]{1,16} "." ){1,2} [a-z]{2,6} "\\""';

/** Email patterns (as zod and other schema writers emit them beside `format: "email"`) that every address of EMAIL_GBNF matches. */
export const KNOWN_EMAIL_PATTERNS: ReadonlySet<string> = new Set([
  // zod 4 (z.email(), z.string().email())
  "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
  // zod 3 via zod-to-json-schema
  "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
]);
