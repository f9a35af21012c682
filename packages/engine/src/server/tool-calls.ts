import { LlamaText, SpecialTokensText, type ChatWrapper } from 'node-llama-cpp';
import { embedJsonGrammar, gbnfLiteral, textNotStartingWith } from './gbnf.ts';

/**
 * Tool calls in the model's own syntax: the one its chat template (through node-llama-cpp's chat
 * wrapper) shows it in the prompt, `||call: NAME({...})` for templates without one. For "required" the
 * answer is one call or more; for "auto" it is either such calls or text that does not begin with the
 * call prefix, decided by the grammar token by token.
 */
export interface ToolCallSyntax {
  prefix: string;
  paramsPrefix: string;
  suffix: string;
}

/** What the grammar lets the model answer: calls only, or calls or text. */
export type ToolCallMode = 'required' | 'auto';

export interface DecodedCalls {
  calls: Array<{ name: string; arguments: string }>;
  /** False when the text ends inside a call (cut at max_tokens or by a stop sequence). */
  complete: boolean;
}

const FALLBACK: ToolCallSyntax = { prefix: '||call: ', paramsPrefix: '(', suffix: ')' };

export function toolCallSyntax(wrapper: ChatWrapper): ToolCallSyntax {
  const call = wrapper.settings.functions.call;
  const parts = [call.prefix, call.paramsPrefix, call.suffix].map(plainText);
  if (parts.some((part) => part === undefined) || parts[0] === '') return FALLBACK;
  return { prefix: parts[0]!, paramsPrefix: parts[1]!, suffix: parts[2]! };
}

/** The text of a wrapper setting, or undefined when it holds a special token that has no text. */
function plainText(value: string | LlamaText): string | undefined {
  let text = '';
  for (const part of LlamaText(value).values) {
    if (typeof part === 'string') text += part;
    else if (part instanceof SpecialTokensText) text += part.value;
    else return undefined;
  }
  return text;
}

/**
 * The GBNF of an answer: calls of the given tools, each with arguments of its parameters' JSON grammar
 * (as node-llama-cpp compiles them), one only unless `parallel`; in "auto" mode, or text.
 */
export function toolCallsGrammar(
  syntax: ToolCallSyntax,
  tools: ReadonlyArray<{ name: string; grammar: string }>,
  mode: ToolCallMode,
  parallel: boolean,
): string {
  const calls = tools.map((tool, i) => `${gbnfLiteral(tool.name + syntax.paramsPrefix)} t${i}-root`).join(' | ');
  const rules = [
    `root ::= ${mode === 'auto' ? 'sigil-text | ' : ''}sigil-calls`,
    `sigil-calls ::= sigil-call${parallel ? ' sigil-call*' : ''}`,
    `sigil-call ::= ${gbnfLiteral(syntax.prefix)} ( ${calls} ) ${gbnfLiteral(syntax.suffix)}`,
    ...tools.map((tool, i) => embedJsonGrammar(tool.grammar, `t${i}-`)),
  ];
  if (mode === 'auto') rules.push(textNotStartingWith([syntax.prefix], 'sigil-text'));
  return rules.join('\n');
}

/** Whether a decoded answer is (or, while it is still being decoded, may become) tool calls rather than text. */
export function startsAsCalls(syntax: ToolCallSyntax, text: string): 'calls' | 'text' | 'undecided' {
  if (text.startsWith(syntax.prefix)) return 'calls';
  return syntax.prefix.startsWith(text) ? 'undecided' : 'text';
}

/**
 * The calls in a decoded answer. Complete calls get their arguments as compact JSON; a call cut before
 * its suffix keeps the arguments as decoded, and the answer is marked incomplete.
 */
export function decodeCalls(syntax: ToolCallSyntax, names: readonly string[], text: string): DecodedCalls {
  const byLength = [...names].sort((a, b) => b.length - a.length);
  const calls: DecodedCalls['calls'] = [];
  let at = 0;
  while (at < text.length) {
    if (!text.startsWith(syntax.prefix, at)) return { calls, complete: false };
    at += syntax.prefix.length;
    const name = byLength.find((n) => text.startsWith(n + syntax.paramsPrefix, at));
    if (name === undefined) return { calls, complete: false };
    at += name.length + syntax.paramsPrefix.length;
    const end = argumentsEnd(syntax, text, at);
    if (end === undefined) {
      calls.push({ name, arguments: text.slice(at) });
      return { calls, complete: false };
    }
    calls.push({ name, arguments: JSON.stringify(JSON.parse(text.slice(at, end))) });
    at = end + syntax.suffix.length;
  }
  return { calls, complete: calls.length > 0 };
}

/** Where the JSON arguments starting at `from` end: the first suffix before which the text is whole JSON. */
function argumentsEnd(syntax: ToolCallSyntax, text: string, from: number): number | undefined {
  for (let end = text.indexOf(syntax.suffix, from); end >= 0; end = text.indexOf(syntax.suffix, end + 1)) {
    try {
      JSON.parse(text.slice(from, end));
      return end;
    } catch {
      // A suffix character inside the JSON (in a string): the arguments go on.
    }
  }
  return undefined;
}
