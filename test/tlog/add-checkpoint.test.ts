import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { formatAddCheckpoint, parseAddCheckpoint, parseTlogSize } from '../../src/protocol/tlog/add-checkpoint.ts';
import { parseCheckpoint } from '../../src/protocol/tlog/checkpoint.ts';
import { parseNote } from '../../src/protocol/tlog/note.ts';

const vector = (name: string) => readFileSync(new URL(`../vectors/tlog-witness/${name}`, import.meta.url), 'utf8');

describe('the add-checkpoint wire format, against the examples of the C2SP tlog-witness text', () => {
  it('reads the example request (old size, four proof hashes, the checkpoint with two signatures) and writes it back byte for byte', () => {
    const body = vector('add-checkpoint-request.txt');
    const request = parseAddCheckpoint(body);
    expect(request.oldSize).toBe(20852014);
    expect(request.proof.map((h) => h.toString('base64'))).toEqual([
      'PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=',
      'jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=',
      '5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=',
      '/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=',
    ]);
    const note = parseNote(request.note);
    expect(parseCheckpoint(note.text)).toMatchObject({ origin: 'example.com/behind-the-sofa', size: 20852163 });
    expect(note.signatures.map((s) => s.name)).toEqual(['example.com/behind-the-sofa', 'example.com/behind-the-sofa']);
    expect(formatAddCheckpoint(request)).toBe(body);
  });

  it('reads the example response as three cosignature lines (key ID, 8-byte timestamp, 64-byte signature)', () => {
    const request = parseAddCheckpoint(vector('add-checkpoint-request.txt'));
    const text = parseNote(request.note).text;
    const lines = parseNote(`${text}\n${vector('add-checkpoint-response.txt')}`).signatures;
    expect(lines.map((l) => [l.name, l.signature.length])).toEqual([
      ['witness.example/w1', 72],
      ['witness.example/w1', 72],
      ['witness.example/w2', 72],
    ]);
  });

  it('refuses malformed bodies: no blank line, a bad old line, a leading zero, 64 proof lines, a short hash', () => {
    const note = parseAddCheckpoint(vector('add-checkpoint-request.txt')).note;
    const hash = Buffer.alloc(32).toString('base64');
    for (const body of ['old 1\n', `old x\n\n${note}`, `old 01\n\n${note}`, `old 1\n${`${hash}\n`.repeat(64)}\n${note}`, `old 1\nAAAA\n\n${note}`])
      expect(() => parseAddCheckpoint(body)).toThrow();
    expect([parseTlogSize('300\n'), parseTlogSize('0\n'), parseTlogSize('300'), parseTlogSize('030\n')]).toEqual([300, 0, undefined, undefined]);
  });
});
