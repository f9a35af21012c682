import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { editJsonObject, scanJsonObject } from '../../src/protocol/json-edit.ts';

/** src/protocol/json-edit.ts: where members sit, duplicate keys at any depth, and edits that keep every other byte. */
const SEED = 0x5161_0028;

const bytes = (text: string) => Buffer.from(text, 'utf8');

/** Any JSON value, written with a random indentation (none, spaces, a tab). */
const objectText = fc
  .tuple(fc.dictionary(fc.string({ unit: 'binary' }), fc.jsonValue(), { maxKeys: 8 }), fc.constantFrom(undefined, 1, 2, '\t'))
  .map(([object, indent]) => ({ object, text: JSON.stringify(object, null, indent) }));

describe('scanJsonObject', () => {
  it('finds each top-level member: its key, and its value as written (property)', () => {
    fc.assert(
      fc.property(objectText, ({ object, text }) => {
        const buf = bytes(text);
        const scan = scanJsonObject(buf);
        expect(scan.duplicate).toBeUndefined();
        expect(scan.members.map((m) => m.key).sort()).toEqual(Object.keys(object).sort());
        scan.members.forEach((m, i) => {
          expect(m.keyStart).toBeGreaterThan(i === 0 ? 0 : scan.members[i - 1]!.valueEnd);
          expect(JSON.parse(buf.toString('utf8', m.keyStart, m.valueStart).replace(/\s*:\s*$/, ''))).toBe(m.key);
          expect(JSON.parse(buf.toString('utf8', m.valueStart, m.valueEnd))).toEqual(object[m.key]);
        });
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('reads strings whose quotes are escaped or follow escaped backslashes', () => {
    const text = '{"a\\"b":"x\\\\","c":"\\\\\\"}{[","d\\\\":[1,"\\"",{"e":true}] }';
    const scan = scanJsonObject(bytes(text));
    expect(scan.duplicate).toBeUndefined();
    expect(scan.members.map((m) => [m.key, text.slice(m.valueStart, m.valueEnd)])).toEqual([
      ['a"b', '"x\\\\"'],
      ['c', '"\\\\\\"}{["'],
      ['d\\', '[1,"\\"",{"e":true}]'],
    ]);
  });

  it('names the first duplicate key with its path, at any depth and under escapes', () => {
    const cases: Array<[string, { key: string; path: string }]> = [
      ['{"model":"a","model":"b"}', { key: 'model', path: 'model' }],
      ['{"m":1,"\\u006d":2}', { key: 'm', path: 'm' }],
      ['{"messages":[{"role":"user"},{"role":"user","content":"x","content":"y"}]}', { key: 'content', path: 'messages[1].content' }],
      ['{"a":{"b":[[0,{"c":1,"c":2}]]}}', { key: 'c', path: 'a.b[0][1].c' }],
      ['{"":{"k":1,"k":2}}', { key: 'k', path: 'k' }],
      ['{"x":{"y":1},"z":{"y":1,"w":{"y":1,"y":3}}}', { key: 'y', path: 'z.w.y' }],
    ];
    for (const [text, duplicate] of cases) expect(scanJsonObject(bytes(text)).duplicate, text).toEqual(duplicate);
  });

  it('finds a duplicate among many keys of one object, and none among many keys of sibling objects', () => {
    const keys = Array.from({ length: 40 }, (_, i) => `"k${i}":${i}`);
    expect(scanJsonObject(bytes(`{${keys.join(',')},"k37":0}`)).duplicate).toEqual({ key: 'k37', path: 'k37' });
    expect(scanJsonObject(bytes(`{"a":{${keys.join(',')}},"b":{${keys.join(',')}}}`)).duplicate).toBeUndefined();
  });
});

describe('editJsonObject', () => {
  const text = '{ "region" : "eu",\n "model":"m", "n":12345678901234567890 , "t":-0.0,"last":1e999 }';

  it('replaces one value and removes members, keeping every other byte', () => {
    const scan = scanJsonObject(bytes(text));
    expect(editJsonObject(bytes(text), scan, { set: { model: '"engine/m"' }, remove: ['region'] }).toString()).toBe(
      '{ "model":"engine/m", "n":12345678901234567890 , "t":-0.0,"last":1e999 }',
    );
    expect(editJsonObject(bytes(text), scan, { remove: ['last'] }).toString()).toBe('{ "region" : "eu",\n "model":"m", "n":12345678901234567890 , "t":-0.0 }');
    expect(editJsonObject(bytes(text), scan, { remove: ['n', 't'] }).toString()).toBe('{ "region" : "eu",\n "model":"m", "last":1e999 }');
    expect(editJsonObject(bytes(text), scan, { set: { t: '0' } }).toString()).toBe(text.replace('-0.0', '0'));
    expect(editJsonObject(bytes('{ }'), scanJsonObject(bytes('{ }')), { remove: ['x'] }).toString()).toBe('{ }');
  });

  it('gives the object with that member set or removed (property)', () => {
    fc.assert(
      fc.property(objectText, fc.nat(), ({ object, text }, pick) => {
        const buf = bytes(text);
        const scan = scanJsonObject(buf);
        const keys = Object.keys(object);
        if (keys.length === 0) return;
        const key = keys[pick % keys.length]!;
        const { [key]: _removed, ...rest } = object;
        expect(JSON.parse(editJsonObject(buf, scan, { remove: [key] }).toString('utf8'))).toEqual(rest);
        expect(JSON.parse(editJsonObject(buf, scan, { set: { [key]: '"set"' } }).toString('utf8'))).toEqual({ ...object, [key]: 'set' });
      }),
      { seed: SEED, numRuns: 300 },
    );
  });
});
