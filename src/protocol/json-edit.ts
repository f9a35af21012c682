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

/**
 * One past the closing quote of the string whose opening quote is at `start`. The quote is found by
 * the native `indexOf` (most of a request's bytes are inside strings); it is escaped when an odd run
 * of backslashes precedes it.
 */
function stringEnd(text: Buffer, start: number): number {
  let at = text.indexOf(QUOTE, start + 1);
  while (at !== -1) {
    let before = at - 1;
    while (text[before] === BACKSLASH) before--;
    if ((at - 1 - before) % 2 === 0) return at + 1;
    at = text.indexOf(QUOTE, at + 1);
  }
  return text.length;
}

/** The key's value as JSON means it ("\u0061" and "a" are the same key). */
function decodeKey(text: Buffer, start: number, end: number): string {
  for (let i = start + 1; i < end - 1; i++) {
    if (text[i] === BACKSLASH) return JSON.parse(text.toString('utf8', start, end)) as string;
  }
  return text.toString('utf8', start + 1, end - 1);
}

/** Objects with more keys than this look them up in a Set; smaller ones in their array. */
const LINEAR_KEYS = 16;

/**
 * One open object or array. Frames are kept per depth and reused by every container at that depth,
 * so a scan allocates per level of nesting, not per container; paths are only built for a duplicate.
 */
interface Frame {
  isObject: boolean;
  /** The keys seen so far in this object. */
  keys: string[];
  /** The same keys once there are more than LINEAR_KEYS of them. */
  keySet: Set<string> | undefined;
  /** For an object: the next string is a key. */
  expectKey: boolean;
  /** The key whose value is being read, for paths. */
  key: string;
  index: number;
}

function enter(frames: Frame[], depth: number, isObject: boolean): Frame {
  let frame = frames[depth];
  if (frame === undefined) {
    frame = { isObject, keys: [], keySet: undefined, expectKey: true, key: '', index: 0 };
    frames[depth] = frame;
    return frame;
  }
  frame.isObject = isObject;
  frame.keys.length = 0;
  frame.keySet = undefined;
  frame.expectKey = true;
  frame.key = '';
  frame.index = 0;
  return frame;
}

/** Adds `key` to the object's keys; false when it was there already. */
function addKey(frame: Frame, key: string): boolean {
  const { keys } = frame;
  if (frame.keySet !== undefined) {
    if (frame.keySet.has(key)) return false;
    frame.keySet.add(key);
  } else {
    for (let k = 0; k < keys.length; k++) if (keys[k] === key) return false;
    if (keys.length === LINEAR_KEYS) frame.keySet = new Set(keys).add(key);
  }
  keys.push(key);
  return true;
}

/** The JSON path of `key` in the object open at `depth`: `a.b[2].key`, or `key` at the top. */
function pathOf(frames: Frame[], depth: number, key: string): string {
  let path = '';
  for (let d = 0; d < depth; d++) {
    const parent = frames[d]!;
    path = parent.isObject ? (path === '' ? parent.key : `${path}.${parent.key}`) : `${path}[${parent.index}]`;
  }
  return path === '' ? key : `${path}.${key}`;
}

/**
 * Scans a JSON object that `JSON.parse` accepted: the top-level members with their byte spans, and
 * the first duplicate key at any depth. Linear in the length of the text.
 */
export function scanJsonObject(text: Buffer): ObjectScan {
  const members: MemberSpan[] = [];
  const frames: Frame[] = [];
  /** How many containers are open; the innermost is frames[depth - 1]. */
  let depth = 0;
  let top: Frame | undefined;
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
    if (b === COMMA) {
      if (top !== undefined) {
        if (top.isObject) top.expectKey = true;
        else top.index++;
      }
      i++;
      continue;
    }
    if (b === QUOTE && top !== undefined && top.isObject && top.expectKey) {
      const end = stringEnd(text, i);
      const key = decodeKey(text, i, end);
      if (!addKey(top, key)) return { members, duplicate: { key, path: pathOf(frames, depth - 1, key) } };
      top.key = key;
      top.expectKey = false;
      if (depth === 1) {
        pendingKeyStart = i;
        pendingKey = key;
      }
      i = end;
      continue;
    }
    // A value starts here.
    if (depth === 1 && valueStart === -1) valueStart = i;
    if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      top = enter(frames, depth, b === OPEN_OBJECT);
      depth++;
      i++;
      continue;
    }
    if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
      depth--;
      top = depth === 0 ? undefined : frames[depth - 1];
      i++;
    } else if (b === QUOTE) {
      i = stringEnd(text, i);
    } else {
      // A number, true, false or null: runs to the next delimiter.
      for (let c = text[i]!; i < n && !isSpace(c) && c !== COMMA && c !== CLOSE_OBJECT && c !== CLOSE_ARRAY; c = text[++i]!);
    }
    if (depth === 1 && valueStart !== -1) {
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
  const { members } = scan;
  if (members.length === 0) return text;
  const { set, remove } = edits;
  const parts: Buffer[] = [text.subarray(0, members[0]!.keyStart)];
  /** The last member kept so far, -1 before the first. */
  let kept = -1;
  for (let k = 0; k < members.length; k++) {
    const m = members[k]!;
    if (remove !== undefined && remove.includes(m.key)) continue;
    if (kept !== -1) parts.push(text.subarray(members[kept]!.valueEnd, members[kept + 1]!.keyStart));
    if (set !== undefined && Object.hasOwn(set, m.key)) parts.push(text.subarray(m.keyStart, m.valueStart), Buffer.from(set[m.key]!, 'utf8'));
    else parts.push(text.subarray(m.keyStart, m.valueEnd));
    kept = k;
  }
  parts.push(text.subarray(members[members.length - 1]!.valueEnd));
  return Buffer.concat(parts);
}
