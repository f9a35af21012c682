import type { LlamaModel, Token } from 'node-llama-cpp';

const CONTEXT_TOKENS = 8;
/** A UTF-8 character spans at most 4 byte-fallback tokens. */
const MAX_HELD_TOKENS = 4;

/** Turns generated tokens into text as they come, holding back a token that ends inside a UTF-8 character. */
export class TokenTextDecoder {
  private pending: Token[] = [];
  private previous: Token[];

  constructor(
    private readonly model: LlamaModel,
    prompt: readonly Token[],
  ) {
    this.previous = prompt.slice(-CONTEXT_TOKENS);
  }

  push(token: Token): string {
    this.pending.push(token);
    const text = this.model.detokenize(this.pending, false, this.previous);
    if (text.endsWith('\uFFFD') && this.pending.length < MAX_HELD_TOKENS) return '';
    return this.take(text);
  }

  flush(): string {
    return this.pending.length === 0 ? '' : this.take(this.model.detokenize(this.pending, false, this.previous));
  }

  private take(text: string): string {
    this.previous = [...this.previous, ...this.pending].slice(-CONTEXT_TOKENS);
    this.pending = [];
    return text;
  }
}
