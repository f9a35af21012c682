import { createPrivateKey, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCheckpoint, parseCheckpoint } from '../../../src/protocol/tlog/checkpoint.ts';
import { cosignedMessage, formatVerifierKey, noteKeyId, openNote, parseVerifierKey } from '../../../src/protocol/tlog/note.ts';
import { encodeTileIndex, parseTilePath, tilePath, tilesOfTree } from '../../../src/protocol/tlog/tile-path.ts';

const v = JSON.parse(readFileSync(join(import.meta.dirname, '../../vectors/tlog/notes.json'), 'utf8')) as Record<string, Record<string, unknown>>;
const str = (group: string, key: string) => v[group]![key] as string;

/** The Ed25519 private key of a Go `PRIVATE+KEY+name+id+base64(type || seed)` signer key (a test vector). */
function seedKey(skey: string) {
  const seed = Buffer.from(skey.split('+').slice(4).join('+'), 'base64').subarray(1);
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]);
  return createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
}

describe('C2SP signed-note, against the specification and Go sumdb/note vectors', () => {
  it('opens the signed-note example with its verifier key', () => {
    const verifier = parseVerifierKey(str('signed_note_example', 'vkey'));
    expect(openNote(str('signed_note_example', 'note'), [verifier])).toEqual({
      text: str('signed_note_example', 'text'),
      signers: [{ name: 'example.com/foo', type: 1 }],
    });
  });

  it('re-makes the published PeterNeumann signature from its private key, byte for byte (Ed25519 is deterministic)', () => {
    const verifier = parseVerifierKey(str('go_sumdb_note', 'vkey'));
    const signature = sign(null, Buffer.from(str('go_sumdb_note', 'text')), seedKey(str('go_sumdb_note', 'skey')));
    const keyId = Buffer.alloc(4);
    keyId.writeUInt32BE(verifier.keyId);
    const note = `${str('go_sumdb_note', 'text')}\n\u2014 PeterNeumann ${Buffer.concat([keyId, signature]).toString('base64')}\n`;
    expect(note).toBe(str('go_sumdb_note', 'note'));
    expect(formatVerifierKey(verifier)).toBe(str('go_sumdb_note', 'vkey'));
  });

  it('refuses a note whose text was altered by one letter', () => {
    const verifier = parseVerifierKey(str('go_sumdb_note', 'vkey'));
    expect(() => openNote(str('go_sumdb_note', 'note').replace('cryptography', 'cryptographY'), [verifier])).toThrow(/does not verify/);
  });

  it('refuses a note no trusted key signed, and ignores signatures of unknown keys', () => {
    const peter = parseVerifierKey(str('go_sumdb_note', 'vkey'));
    expect(() => openNote(str('signed_note_example', 'note'), [peter])).toThrow(/no trusted key signed/);
    const both = str('go_sumdb_note', 'note') + str('signed_note_example', 'note').split('\n\n')[1];
    expect(openNote(both, [peter]).signers).toEqual([{ name: 'PeterNeumann', type: 1 }]);
  });

  it('opens a real sum.golang.org checkpoint and reads its origin, size and root', () => {
    const log = parseVerifierKey(str('sumdb_checkpoint', 'vkey'));
    const cp = openCheckpoint(str('sumdb_checkpoint', 'note'), log, str('sumdb_checkpoint', 'origin'));
    expect({ origin: cp.origin, size: cp.size, root: cp.root.toString('base64') }).toEqual({
      origin: v.sumdb_checkpoint!.origin,
      size: v.sumdb_checkpoint!.size,
      root: v.sumdb_checkpoint!.root_base64,
    });
    expect(() => openCheckpoint(str('sumdb_checkpoint', 'note'), log, 'another origin')).toThrow(/not the log's "another origin"/);
  });

  it('computes key IDs as the specification says, for both Ed25519 (1) and cosignature/v1 (4) keys', () => {
    for (const vkey of [str('signed_note_example', 'vkey'), str('go_sumdb_note', 'vkey'), str('sumdb_checkpoint', 'vkey'), str('cosignature_vkey', 'vkey')]) {
      const parsed = parseVerifierKey(vkey);
      expect(noteKeyId(parsed.name, parsed.type, parsed.publicKey).toString(16).padStart(8, '0')).toBe(vkey.split('+')[1]);
    }
    expect(parseVerifierKey(str('cosignature_vkey', 'vkey')).type).toBe(4);
    expect(() => parseVerifierKey(str('go_sumdb_note', 'vkey').replace('c74f20a3', 'c74f20a4'))).toThrow(/not the one of this name and key/);
  });

  it('builds the cosignature/v1 message of the tlog-cosignature example', () => {
    expect(cosignedMessage(str('cosignature_message', 'checkpoint_text'), v.cosignature_message!.timestamp as number).toString()).toBe(
      str('cosignature_message', 'message'),
    );
  });

  it('refuses malformed checkpoints', () => {
    expect(() => parseCheckpoint('origin\n012\nmb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk=\n')).toThrow(/leading zeros/);
    expect(() => parseCheckpoint('origin\n12\nnot base64!\n')).toThrow(/base64/);
    expect(() => parseCheckpoint('origin\n12\n')).toThrow(/origin, a size and a root/);
  });
});

describe('C2SP tlog-tiles paths', () => {
  it('encodes 1234067 as x001/x234/067, as the specification shows, and reads it back', () => {
    expect(encodeTileIndex(1234067)).toBe('x001/x234/067');
    expect(tilePath({ level: 0, index: 1234067, width: 256 })).toBe('tile/0/x001/x234/067');
    expect(tilePath({ level: 'entries', index: 5, width: 17 })).toBe('tile/entries/005.p/17');
    expect(parseTilePath('tile/2/x001/x234/067.p/8')).toEqual({ level: 2, index: 1234067, width: 8 });
    expect(parseTilePath('tile/0/000')).toEqual({ level: 0, index: 0, width: 256 });
    expect(parseTilePath('tile/entries/x001/000')).toEqual({ level: 'entries', index: 1000, width: 256 });
  });

  it('refuses the paths the specification does not allow', () => {
    for (const bad of [
      'tile/00/000',
      'tile/0/1',
      'tile/0/000.p/256',
      'tile/0/000.p/0',
      'tile/64/000',
      'tile/0/x000/123',
      'tile/0/001/002',
      'tile/0/000.p/08',
    ]) {
      expect(() => parseTilePath(bad), bad).toThrow(expect.objectContaining({ code: 'ERR_TLOG_TILE' }));
    }
  });

  it('serves a tree of 70,000 as the specification counts: 273 full and a 112-wide level 0, one full and a 17-wide level 1, a 1-wide level 2', () => {
    const count = (size: number) => {
      const tiles = tilesOfTree(size);
      const full: Record<string, number> = {};
      const partial: Record<string, number> = {};
      for (const t of tiles) {
        if (t.width === 256) full[t.level] = (full[t.level] ?? 0) + 1;
        else partial[t.level] = t.width;
      }
      return { full, partial };
    };
    expect(count(70000)).toEqual(v.tile_paths!.tiles_of_size_70000);
    expect(count(256)).toEqual(v.tile_paths!.tiles_of_size_256);
  });
});
