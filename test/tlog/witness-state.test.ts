import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WitnessState } from '../../src/tlog/witness-state.ts';

function stateFile(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'sigil-witness-state-')), 'state.json');
  writeFileSync(file, text);
  return file;
}

describe("a witness's state file it cannot use stops it with ERR_WITNESS_STATE (docs/errors.md)", () => {
  it('a tree without a size and a root, named by its origin', async () => {
    const file = stateFile(JSON.stringify({ 'example.com/log': { size: '12', root: 'AAAA' } }));
    await expect(WitnessState.open(file)).rejects.toMatchObject({
      code: 'ERR_WITNESS_STATE',
      name: 'WitnessStateError',
      message: `${file}: the state of example.com/log is not {size, root}`,
    });
  });

  it('a file that is not JSON', async () => {
    const file = stateFile('{"example.com/log": ');
    await expect(WitnessState.open(file)).rejects.toMatchObject({
      code: 'ERR_WITNESS_STATE',
      message: expect.stringMatching(new RegExp(`^${file}: not JSON \\(`)),
    });
  });

  it('an absent file is an empty state, not an error', async () => {
    const state = await WitnessState.open(join(mkdtempSync(join(tmpdir(), 'sigil-witness-state-')), 'absent.json'));
    expect(state.get('example.com/log')).toBeUndefined();
  });
});
