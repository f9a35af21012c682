import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { codeOutsideArtifact } from '../../src/attestation/artifact-refusals.ts';

const work = mkdtempSync(join(tmpdir(), 'sigil-artifact-refusals-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** An installed artifact in its own folder, with the listing the launcher would hand over. */
function artifactAt(name: string) {
  const root = join(work, name, 'app');
  mkdirSync(join(root, 'bin'), { recursive: true });
  mkdirSync(join(root, 'dist/addons'), { recursive: true });
  mkdirSync(join(root, 'dist/sigil'), { recursive: true });
  for (const file of ['bin/sigil.js', 'dist/sigil/main.mjs', 'dist/addons/koffi.node']) writeFileSync(join(root, file), file);
  const listing = ['bin/sigil.js', 'dist/addons/koffi.node', 'dist/sigil/main.mjs'].map((f) => `${'0'.repeat(64)}  ${f}\n`).join('');
  return { artifact: { root, listing } };
}

/** What a run as root on a writable file system always finds; the rest is what a test planted. */
const beyondWritable = (found: string[]) => found.filter((f) => !f.endsWith('is writable by this process (the code could change under it)'));

describe('on hardware, Sigil refuses code that could come from outside its artifact', () => {
  it('names a node_modules folder beside the bundle and one in a folder above the package', () => {
    const code = artifactAt('stray');
    mkdirSync(join(code.artifact.root, 'dist/node_modules/undici'), { recursive: true });
    mkdirSync(join(work, 'stray/node_modules'));
    expect(beyondWritable(codeOutsideArtifact(code, {}, []))).toEqual([
      `a node_modules folder at ${join(code.artifact.root, 'dist/node_modules')} (Node would resolve packages from it; the artifact loads none)`,
      `a node_modules folder at ${join(work, 'stray/node_modules')} (Node would resolve packages from it; the artifact loads none)`,
    ]);
  });

  it('names NODE_PATH and an existing global module folder, not an absent one', () => {
    const code = artifactAt('paths');
    const globalFolder = join(work, 'paths/.node_modules');
    mkdirSync(globalFolder);
    expect(beyondWritable(codeOutsideArtifact(code, { NODE_PATH: '/opt/lib' }, [globalFolder, join(work, 'paths/.node_libraries')]))).toEqual([
      'NODE_PATH=/opt/lib (Node would load packages from it)',
      `a global module folder at ${globalFolder} (require() would search it)`,
    ]);
  });

  it('names each code file and folder this process may write', () => {
    const code = artifactAt('writable');
    const root = code.artifact.root;
    expect(codeOutsideArtifact(code, {}, []).filter((f) => beyondWritable([f]).length === 0)).toEqual(
      [
        root,
        join(root, 'bin'),
        join(root, 'dist'),
        join(root, 'dist/sigil'),
        join(root, 'dist/addons'),
        join(root, 'bin/sigil.js'),
        join(root, 'dist/addons/koffi.node'),
        join(root, 'dist/sigil/main.mjs'),
      ].map((path) => `${path} is writable by this process (the code could change under it)`),
    );
  });

  it('refuses the compiled library run as a server, not the TypeScript sources', () => {
    expect(codeOutsideArtifact({ dir: '/opt/sigil/dist' }, {}, [])).toEqual([
      'Sigil runs from /opt/sigil/dist, not from its measured artifact (start it as bin/sigil.js after `npm run build`)',
    ]);
    expect(codeOutsideArtifact({ dir: '/work/sigil/src' }, {}, [])).toEqual([]);
  });
});

describe("the built-in engine's folders", () => {
  it('are held to the same rule as the bundle: each one this process may write is named', () => {
    const code = artifactAt('engine');
    const root = code.artifact.root;
    mkdirSync(join(root, 'engine/node_modules/llama'), { recursive: true });
    writeFileSync(join(root, 'engine/node_modules/llama/index.js'), 'engine');
    code.artifact.listing += `${'0'.repeat(64)}  engine/node_modules/llama/index.js\n`;
    const writable = codeOutsideArtifact(code, {}, []).filter((f) => beyondWritable([f]).length === 0);
    expect(writable).toEqual(
      expect.arrayContaining(
        ['engine', 'engine/node_modules', 'engine/node_modules/llama', 'engine/node_modules/llama/index.js'].map(
          (f) => `${join(root, f)} is writable by this process (the code could change under it)`,
        ),
      ),
    );
  });
});
