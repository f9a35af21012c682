/**
 * Small pieces of llama.cpp's GBNF grammar language, to compose grammars that node-llama-cpp does not
 * write itself: the JSON grammar it compiles for a schema, embedded under other rule names, and a rule
 * for text that does not begin with a given string.
 */

/** A GBNF string literal; control characters are escaped, the rest is written as it is. */
export function gbnfLiteral(text: string): string {
  let out = '"';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (char === '"' || char === '\\') out += `\\${char}`;
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else out += char;
  }
  return `${out}"`;
}

/** How node-llama-cpp ends the root of a JSON-schema grammar: blank lines that let generation stop. */
const JSON_ROOT_TAIL = ' "\\n\\n\\n\\n" [\\n]*';

/**
 * The rules of a node-llama-cpp JSON-schema grammar with every rule name prefixed (so several can
 * share one grammar) and the root's trailing blank lines removed; its root rule is `${prefix}root`.
 */
export function embedJsonGrammar(grammar: string, prefix: string): string {
  const lines = grammar.split('\n').filter((line) => line.trim() !== '');
  return lines
    .map((line) => {
      const at = line.indexOf(' ::= ');
      if (at < 0) throw new Error(`unexpected GBNF line from node-llama-cpp: ${line.slice(0, 80)}`);
      const name = line.slice(0, at);
      let body = line.slice(at + 5);
      if (name === 'root') {
        if (!body.endsWith(JSON_ROOT_TAIL)) throw new Error('the JSON grammar root no longer ends as node-llama-cpp 3 wrote it');
        body = body.slice(0, -JSON_ROOT_TAIL.length);
      }
      return `${prefix}${name} ::= ${renameRules(body, prefix)}`;
    })
    .join('\n');
}

/** Prefixes the rule names a rule body refers to, leaving string literals, character classes and repetition counts alone. */
function renameRules(body: string, prefix: string): string {
  let out = '';
  let i = 0;
  while (i < body.length) {
    const char = body[i]!;
    const close = char === '"' ? '"' : char === '[' ? ']' : char === '{' ? '}' : undefined;
    if (close !== undefined) {
      let j = i + 1;
      while (j < body.length && body[j] !== close) j += body[j] === '\\' ? 2 : 1;
      out += body.slice(i, j + 1);
      i = j + 1;
    } else if (/[a-zA-Z0-9_-]/.test(char)) {
      const name = /^[a-zA-Z0-9_-]+/.exec(body.slice(i))![0];
      out += prefix + name;
      i += name.length;
    } else {
      out += char;
      i++;
    }
  }
  return out;
}

/**
 * Rules named `${name}`... that accept any text, the empty text included, except text that begins with
 * one of `forbidden`: a branch per character of each forbidden string, so a text may share a start with
 * one and then leave it.
 */
export function textNotStartingWith(forbidden: readonly string[], name: string): string {
  const rules: string[] = [`${name}-any ::= [^\\x00]*`];
  const build = (prefixes: readonly string[], rule: string): void => {
    const next = new Map<string, string[]>();
    for (const text of prefixes) {
      const [first, ...rest] = text;
      next.set(first!, [...(next.get(first!) ?? []), rest.join('')]);
    }
    const alternatives = ['""'];
    const chars = [...next.keys()];
    alternatives.push(`[^${chars.map(classChar).join('')}] ${name}-any`);
    chars.forEach((char, i) => {
      const tails = next.get(char)!;
      // The whole of a forbidden string has been read: no text goes on from here.
      if (tails.includes('')) return;
      const child = `${rule}-${i}`;
      alternatives.push(`${gbnfLiteral(char)} ${child}`);
      build(tails, child);
    });
    rules.push(`${rule} ::= ${alternatives.join(' | ')}`);
  };
  build(forbidden, name);
  return rules.join('\n');
}

function classChar(char: string): string {
  const code = char.codePointAt(0)!;
  return code <= 0xffff ? `\\u${code.toString(16).padStart(4, '0')}` : `\\U${code.toString(16).padStart(8, '0')}`;
}
