import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildManifest, manifestDigest, manifestOfConfig, type ManifestInputs } from '../../src/attestation/manifest.ts';
import { loadConfig } from '../../src/config/load.ts';

let pkg: string;

beforeAll(async () => {
  // An installed Sigil: its code, a production package (hpke) and a development one (vitest) under node_modules.
  pkg = await mkdtemp(join(tmpdir(), 'sigil-manifest-'));
  await mkdir(join(pkg, 'dist'), { recursive: true });
  await mkdir(join(pkg, 'node_modules/hpke/dist'), { recursive: true });
  await mkdir(join(pkg, 'node_modules/vitest'), { recursive: true });
  await writeFile(join(pkg, 'package.json'), JSON.stringify({ name: 'sigil', version: '1.2.3' }));
  await writeFile(
    join(pkg, 'package-lock.json'),
    JSON.stringify({ packages: { '': {}, 'node_modules/hpke': {}, 'node_modules/vitest': { dev: true }, 'node_modules/not-installed': { optional: true } } }),
  );
  await writeFile(join(pkg, 'dist/main.js'), 'main\n');
  await writeFile(join(pkg, 'node_modules/hpke/dist/open.js'), 'export function open() {}\n');
  await writeFile(join(pkg, 'node_modules/vitest/index.js'), 'dev only\n');
  await writeFile(join(pkg, 'sigil.yaml'), 'listen: {}\n');
});

afterAll(async () => {
  for (const dir of [pkg, ...copies]) await rm(dir, { recursive: true, force: true });
});

const inputs = (over: Partial<ManifestInputs> = {}): ManifestInputs => ({
  codeDir: join(pkg, 'dist'),
  runtime: { execArgv: [], env: {} },
  configSha256: 'c0'.repeat(32),
  catalogueSha256: null,
  keysFile: 'api-keys',
  trustPageDir: null,
  models: [],
  nodeBinary: join(pkg, 'package.json'),
  ...over,
});
const digest = async (over: Partial<ManifestInputs> = {}) => manifestDigest(await buildManifest(inputs(over))).sha384;
const copies: string[] = [];

describe('the manifest', () => {
  it('changes when one file of a production package in node_modules changes, not when a development one does', async () => {
    const copy = async (name: string, edit?: { file: string; text: string }) => {
      const dir = join(pkg, '..', `${pkg.split('/').at(-1)}-${name}`);
      await cp(pkg, dir, { recursive: true });
      if (edit !== undefined) await writeFile(join(dir, edit.file), edit.text);
      copies.push(dir);
      return digest({ codeDir: join(dir, 'dist'), nodeBinary: join(pkg, 'package.json') });
    };
    const same = await copy('same');
    expect(await digest()).toBe(same);
    expect(await copy('hpke', { file: 'node_modules/hpke/dist/open.js', text: 'export function open() { leak(); }\n' })).not.toBe(same);
    expect(await copy('vitest', { file: 'node_modules/vitest/index.js', text: 'changed\n' })).toBe(same);
  });

  it('lists production packages file by file and leaves development-only ones out', async () => {
    const { nodeModulesManifest } = await import('../../src/attestation/file-manifest.ts');
    const listing = await nodeModulesManifest(pkg);
    expect(
      listing
        .split('\n')
        .filter(Boolean)
        .map((l) => l.slice(66)),
    ).toEqual(['node_modules/hpke/dist/open.js']);
  });

  it('names execArgv and the environment Node reads; a secret by its hash only', async () => {
    const m = await buildManifest(
      inputs({
        runtime: { execArgv: ['--max-old-space-size=512'], env: { NODE_OPTIONS: '--no-warnings', HOME: '/root', SIGIL_METRICS_TOKEN: 'hunter2' } },
        extraEnv: ['SIGIL_METRICS_TOKEN'],
      }),
    );
    expect(m.exec_argv).toEqual(['--max-old-space-size=512']);
    expect(m.env).toEqual({ NODE_OPTIONS: '--no-warnings', SIGIL_METRICS_TOKEN: 'sha256:f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7' });
    expect(JSON.stringify(m)).not.toContain('hunter2');
  });

  it('is the same for one setup copied to two folders: the keys file is named relative to the config, the config by its bytes', async () => {
    const setups = await Promise.all(
      ['a', 'b'].map(async (name) => {
        const dir = await mkdtemp(join(tmpdir(), `sigil-setup-${name}-`));
        copies.push(dir);
        await writeFile(join(dir, 'sigil.yaml'), 'auth: {keys_file: .sigil/api-keys}\n');
        const config = loadConfig(join(dir, 'sigil.yaml'));
        return manifestOfConfig(config, null, { execArgv: [], env: {} }, [], join(pkg, 'dist'));
      }),
    );
    expect(setups.map((m) => m.keys_file)).toEqual(['.sigil/api-keys', '.sigil/api-keys']);
    expect(setups[0]!.config_sha256).toBe(createHash('sha256').update('auth: {keys_file: .sigil/api-keys}\n').digest('hex'));
    expect(manifestDigest(setups[0]!).sha384).toBe(manifestDigest(setups[1]!).sha384);
    expect(JSON.stringify(setups[0])).not.toContain(tmpdir());
  });
});
