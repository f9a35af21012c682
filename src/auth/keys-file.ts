import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { SigilError } from '../protocol/sigil-error.ts';

/**
 * The keys file holds one line per API key: `sha256:<hex> <created> [label]`. The key itself is
 * never stored; it is shown once by `sigil keys add`.
 */
export interface StoredKey {
  /** Lowercase hex SHA-256 of the key; its first 12 digits are the key's id. */
  hash: string;
  created: string;
  label: string;
}

const HEADER = '# Sigil API keys: the SHA-256 of each key, never the key. One per line: hash, created, label.\n';
const KEY_PREFIX = 'sk-sigil-';

export class KeysFileError extends SigilError<'ERR_KEYS_FILE'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_KEYS_FILE', message, options);
  }
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function keyId(hash: string): string {
  return hash.slice(0, 12);
}

export function parseKeysFile(text: string, source: string): StoredKey[] {
  const keys: StoredKey[] = [];
  text.split('\n').forEach((line, i) => {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    const [hashField, created = '', ...label] = trimmed.split(/\s+/);
    const match = /^sha256:([0-9a-f]{64})$/.exec(hashField ?? '');
    if (!match) throw new KeysFileError(`${source}:${i + 1}: expected 'sha256:<64 hex digits>' at the start of the line`);
    keys.push({ hash: match[1]!, created, label: label.join(' ') });
  });
  return keys;
}

export function readKeysFile(path: string): StoredKey[] {
  if (!existsSync(path)) return [];
  return parseKeysFile(readFileSync(path, 'utf8'), path);
}

/** Creates a new random key, appends its hash, and returns the key: the only time it exists in clear. */
export function addKey(path: string, label = ''): { key: string; id: string } {
  const key = KEY_PREFIX + randomBytes(32).toString('base64url');
  const hash = hashApiKey(key);
  const line = `sha256:${hash} ${new Date().toISOString()}${label ? ' ' + label.replace(/\s+/g, '-') : ''}\n`;
  mkdirSync(dirname(path), { recursive: true });
  if (!existsSync(path)) writeFileSync(path, HEADER, { mode: 0o600 });
  appendFileSync(path, line);
  return { key, id: keyId(hash) };
}

/** Removes the one key whose hash starts with `prefix` (at least 6 hex digits), or whose clear text is `prefix`. */
export function revokeKey(path: string, prefix: string): StoredKey {
  const keys = readKeysFile(path);
  const wanted = prefix.startsWith(KEY_PREFIX) ? hashApiKey(prefix) : prefix.toLowerCase();
  if (!/^[0-9a-f]{6,64}$/.test(wanted)) throw new KeysFileError('give at least 6 hex digits of the key id, or the key itself');
  const matches = keys.filter((k) => k.hash.startsWith(wanted));
  if (matches.length === 0) throw new KeysFileError(`no key with id ${prefix}`);
  if (matches.length > 1) throw new KeysFileError(`${matches.length} keys start with ${prefix}: give more digits`);
  const revoked = matches[0]!;
  const rest = keys.filter((k) => k !== revoked);
  const text = HEADER + rest.map((k) => `sha256:${k.hash} ${k.created}${k.label ? ' ' + k.label : ''}\n`).join('');
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, path);
  return revoked;
}
