import { EvidenceError } from '../errors.ts';

/**
 * Intel signs the exact bytes of one member of its JSON responses (`tcbInfo`, `enclaveIdentity`), as served: the
 * signature is over that text, not over any re-serialisation. This finds the member's value in the original text.
 */
export function rawJsonMember(text: string, key: string): string {
  const keyAt = text.indexOf(`"${key}"`);
  if (keyAt === -1) throw new EvidenceError('ERR_COLLATERAL', `no "${key}" member`);
  const start = text.indexOf('{', keyAt + key.length + 2);
  if (start === -1 || text.slice(keyAt + key.length + 2, start).trim() !== ':') throw new EvidenceError('ERR_COLLATERAL', `"${key}" is not an object`);
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}') {
      depth--;
      if (depth === 0) return text.slice(start, i + 1);
    }
  }
  throw new EvidenceError('ERR_COLLATERAL', `"${key}" is not closed`);
}
