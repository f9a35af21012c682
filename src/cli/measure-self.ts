import { codeListings, manifestDigest, manifestOfConfig, runningCode } from '../attestation/manifest.ts';
import { currentRuntime } from '../attestation/runtime-options.ts';
import { loadCatalogue } from '../catalogue/catalogue.ts';
import { measureWeights, type MeasuredModel } from '../catalogue/weights.ts';
import type { LoadedConfig } from '../config/load.ts';
import { ensureDemoModel } from '@sigil/engine/demo-model';
import { sha256File } from '@sigil/engine/hash';
import { builtinModelId, builtinModelPath } from '../http/builtin-engine.ts';
import { CONFIG_OPTION, readConfigOrExit } from './config-arg.ts';
import { parseCommandLine, type CommandSpec } from './command-line.ts';

export const command = {
  name: 'measure self',
  summary: `Prints the manifest Sigil measures for this build, config and catalogue, then its SHA-384: the manifest_sha384 the
running Sigil names in its runtime events and binding (docs/auditing.md). Run it with the node options and environment
Sigil runs with.`,
  options: {
    config: CONFIG_OPTION,
    files: {
      type: 'boolean',
      description:
        'first print the code listing (for the artifact: bin/sigil.js, the bundle dist/sigil/ and its native addons) and, when not run from the artifact, the node_modules listing, file by file',
    },
  },
} as const satisfies CommandSpec;

/** The catalogue's models with their weights measured, and the SHA-256 of the catalogue bytes that were parsed. */
async function catalogueModels(config: LoadedConfig, path: string): Promise<{ models: MeasuredModel[]; catalogueSha256: string | null }> {
  const catalogue = loadCatalogue(path, Object.keys(config.upstreams));
  const models = await measureWeights(catalogue.models, (done, total) =>
    process.stderr.write(`hashing model weights: ${Math.round(done / 1e6)} of ${Math.round(total / 1e6)} MB\n`),
  );
  return { models, catalogueSha256: catalogue.sha256 };
}

/** With no upstream and no catalogue, `sigil serve` serves the built-in engine's one model, measured from its file: so is it here. */
async function builtinModels(config: LoadedConfig): Promise<MeasuredModel[]> {
  const modelPath = builtinModelPath(config);
  if (config.engine.model === undefined) await ensureDemoModel(modelPath);
  return [{ id: builtinModelId(modelPath), model_hash: `sha256:${await sha256File(modelPath)}`, measured: true }];
}

/** `sigil measure self`: the manifest and its digest, computed as `sigil serve` computes them, without starting anything. */
export async function run(argv: string[]): Promise<number> {
  const line = parseCommandLine(command, argv);
  if (typeof line === 'number') return line;
  const files = line.values.files === true;
  const config = readConfigOrExit(line.values.config);
  if (config === undefined) return 1;
  if (config.catalogue === undefined && Object.keys(config.upstreams).length > 0) {
    process.stderr.write('sigil measure self: the config names upstreams but no catalogue: give the catalogue `sigil serve` would serve\n');
    return 1;
  }
  try {
    const { models, catalogueSha256 } =
      config.catalogue === undefined ? { models: await builtinModels(config), catalogueSha256: null } : await catalogueModels(config, config.catalogue);
    const manifest = await manifestOfConfig(config, catalogueSha256, currentRuntime(), models);
    if (files) {
      const { root, code, nodeModules } = await codeListings(runningCode());
      process.stdout.write(`# ${root === 'artifact' ? 'artifact' : `${root}/`} (code.sha256 = SHA-256 of these lines)\n${code}`);
      if (nodeModules !== null) process.stdout.write(`# node_modules (node_modules.sha256)\n${nodeModules}`);
    }
    const { text, sha384 } = manifestDigest(manifest);
    process.stdout.write(`${text}\nmanifest_sha384 ${sha384}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`sigil measure self: ${(err as Error).message}\n`);
    return 1;
  }
}
