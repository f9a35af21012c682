import type { Vocab } from '../vocab/read-vocab.ts';

export interface TextCodec {
  /** Token ids of `text` as it reads right after a control token (no leading-space marker). */
  tokenize(text: string): number[];
  /** Text of `tokens` when they follow `previous`. */
  detokenize(tokens: readonly number[], previous: readonly number[]): string;
}

/**
 * The tokens a scripted model emits for `text`, each id at most once: a scripted model picks its next token
 * from the current one alone, so a repeated id would loop. A piece that repeats is respelled with other
 * tokens that read the same (two shorter vocabulary pieces, else its bytes as byte-fallback tokens).
 */
export function scriptTokens(text: string, codec: TextCodec, vocab: Vocab, after: number): number[] {
  const used = new Set<number>();
  const out: number[] = [];
  for (const id of codec.tokenize(text)) {
    const spelling = used.has(id) ? respell(vocab.tokens[id]!, vocab, used) : [id];
    if (!spelling) {
      throw new Error(`cannot script ${JSON.stringify(text)}: the piece ${JSON.stringify(vocab.tokens[id])} repeats more often than it can be respelled`);
    }
    for (const t of spelling) used.add(t);
    out.push(...spelling);
  }
  const reads = codec.detokenize(out, [after]);
  if (reads !== text) throw new Error(`cannot script ${JSON.stringify(text)}: its tokens read back as ${JSON.stringify(reads)}`);
  return out;
}

function respell(piece: string, vocab: Vocab, used: Set<number>): number[] | undefined {
  const chars = [...piece];
  for (let cut = 1; cut < chars.length; cut++) {
    const head = vocab.idOf(chars.slice(0, cut).join(''));
    const tail = vocab.idOf(chars.slice(cut).join(''));
    if (head !== undefined && tail !== undefined && head !== tail && !used.has(head) && !used.has(tail)) return [head, tail];
  }
  const bytes = [...Buffer.from(piece.replaceAll('\u2581', ' '), 'utf8')];
  const ids = bytes.map((b) => vocab.idOf(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`));
  if (ids.some((id) => id === undefined || used.has(id)) || new Set(ids).size !== ids.length) return undefined;
  return ids as number[];
}
