/**
 * Byte-exact edits of a JSON object. Sigil must rename `model` and drop its extension
 * fields without re-serialising the body: `JSON.stringify(JSON.parse(x))` changes numbers
 * (`12345678901234567890`, `1e999`, `-0.0`) and the engine would get a request the receipt does not
 * describe. The scanner here walks text that `JSON.parse` has already accepted, so it only needs to
 * find where things are; it also finds duplicate keys, which `JSON.parse` silently resolves.
 */

/** Where one member of the top-level object sits, as byte offsets into the text. */
export interface MemberSpan {
  key: string;
  /** The opening quote of the key. */
  keyStart: number;
  /** The first byte of the value. */
  valueStart: number;
  /** One past the last byte of the value. */
  valueEnd: number;
}

export interface ObjectScan {
  members: MemberSpan[];
  /** The first key that appears twice in one object, anywhere in the document, with its JSON path. */
  duplicate?: { key: string; path: string };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

/** One past the closing quote of the string whose opening quote is at `start`. */
function stringEnd(text: Buffer, start: number): number {
  let i = start + 1;
  for (;;) {
    const b = text[i]!;
    if (b === QUOTE) return i + 1;
    i += b === BACKSLASH ? 2 : 1;
  }
}

/** The key's value as JSON means it ("\u0061" and "a" are the same key). */
function decodeKey(text: Buffer, start: number, end: number): string {
  const raw = text.subarray(start, end);
  return raw.includes(BACKSLASH) ? (JSON.parse(raw.toString('utf8')) as string) : raw.toString('utf8', 1, raw.length - 1);
}

interface Frame {
  keys: Set<string> | undefined;
  path: string;
  /** For an object: the next string is a key. */
  expectKey: boolean;
  /** The key whose value is being read, for paths. */
  key: string;
  index: number;
}

/**
 * Scans a JSON object that `JSON.parse` accepted: the top-level members with their byte spans, and
 * the first duplicate key at any depth. Linear in the length of the text.
 */
export function scanJsonObject(text: Buffer): ObjectScan {
  const members: MemberSpan[] = [];
  const stack: Frame[] = [];
  let pendingKeyStart = -1;
  let pendingKey = '';
  let valueStart = -1;
  const n = text.length;
  for (let i = 0; i < n;) {
    const b = text[i]!;
    if (isSpace(b) || b === COLON) {
      i++;
      continue;
    }
    const top = stack[stack.length - 1];
    if (b === COMMA) {
      if (top !== undefined) {
        if (top.keys !== undefined) top.expectKey = true;
        else top.index++;
      }
      i++;
      continue;
    }
    if (top?.keys !== undefined && top.expectKey && b === QUOTE) {
      const end = stringEnd(text, i);
      const key = decodeKey(text, i, end);
      if (top.keys.has(key)) return { members, duplicate: { key, path: top.path === '' ? key : `${top.path}.${key}` } };
      top.keys.add(key);
      top.key = key;
      top.expectKey = false;
      if (stack.length === 1) {
        pendingKeyStart = i;
        pendingKey = key;
      }
      i = end;
      continue;
    }
    // A value starts here.
    if (stack.length === 1 && valueStart === -1) valueStart = i;
    if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      const path = top === undefined ? '' : top.keys !== undefined ? (top.path === '' ? top.key : `${top.path}.${top.key}`) : `${top.path}[${top.index}]`;
      stack.push({ keys: b === OPEN_OBJECT ? new Set() : undefined, path, expectKey: true, key: '', index: 0 });
      i++;
      continue;
    }
    if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
      stack.pop();
      i++;
    } else if (b === QUOTE) {
      i = stringEnd(text, i);
    } else {
      // A number, true, false or null: runs to the next delimiter.
      while (i < n && !isSpace(text[i]!) && text[i] !== COMMA && text[i] !== CLOSE_OBJECT && text[i] !== CLOSE_ARRAY) i++;
    }
    if (stack.length === 1 && valueStart !== -1) {
      members.push({ key: pendingKey, keyStart: pendingKeyStart, valueStart, valueEnd: i });
      valueStart = -1;
    }
  }
  return { members };
}

/**
 * The object's text with some top-level values replaced (by already-serialised JSON) and some
 * members removed; every other byte is kept as it was. Each kept member keeps the separator that
 * followed it; the last kept one is followed by the object's own closing bytes.
 */
export function editJsonObject(text: Buffer, scan: ObjectScan, edits: { set?: Record<string, string>; remove?: readonly string[] }): Buffer {
  const set = edits.set ?? {};
  const remove = new Set(edits.remove ?? []);
  const { members } = scan;
  if (members.length === 0) return text;
  const last = members[members.length - 1]!;
  const kept = members.map((m, i) => ({ m, next: members[i + 1] })).filter(({ m }) => !remove.has(m.key));
  const parts: Buffer[] = [text.subarray(0, members[0]!.keyStart)];
  kept.forEach(({ m, next }, i) => {
    const value = Object.hasOwn(set, m.key) ? Buffer.from(set[m.key]!, 'utf8') : text.subarray(m.valueStart, m.valueEnd);
    parts.push(text.subarray(m.keyStart, m.valueStart), value);
    if (i < kept.length - 1) parts.push(text.subarray(m.valueEnd, next!.keyStart));
  });
  parts.push(text.subarray(last.valueEnd));
  return Buffer.concat(parts);
}
