import { hashModel, modelManifest } from '@sigil/engine/hash';

const USAGE = 'usage: sigil hash-model PATH [--manifest]\n';

/** `sigil hash-model PATH`: prints the model_hash of a model file or directory; `--manifest` prints what a directory hash covers. */
export async function run(argv: string[]): Promise<number> {
  const showManifest = argv.includes('--manifest');
  const paths = argv.filter((arg) => arg !== '--manifest');
  if (paths.length !== 1 || paths[0]!.startsWith('-')) {
    process.stderr.write(USAGE);
    return 2;
  }
  try {
    if (showManifest) process.stdout.write(await modelManifest(paths[0]!));
    process.stdout.write(`${await hashModel(paths[0]!)}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`sigil hash-model: ${(error as Error).message}\n`);
    return 1;
  }
}
