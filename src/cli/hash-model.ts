import { hashModel, modelManifest } from '@sigil/engine/hash';

import { parseCommandLine, type CommandSpec } from './command-line.ts';

export const command = {
  name: 'hash-model',
  summary: 'Prints the catalogue model_hash of a weights file or directory.',
  operands: [['<PATH>', 'a weights file, or a directory of them']],
  options: { manifest: { type: 'boolean', description: 'first print the per-file list a directory hash covers' } },
} as const satisfies CommandSpec;

/** `sigil hash-model PATH`: prints the model_hash of a model file or directory; `--manifest` prints what a directory hash covers. */
export async function run(argv: string[]): Promise<number> {
  const line = parseCommandLine(command, argv);
  if (typeof line === 'number') return line;
  const path = line.positionals[0]!;
  try {
    if (line.values.manifest === true) process.stdout.write(await modelManifest(path));
    process.stdout.write(`${await hashModel(path)}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`sigil hash-model: ${(error as Error).message}\n`);
    return 1;
  }
}
