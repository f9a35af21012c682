import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';

/** `sigil measure self` with no --config, where the default config (config/sigil.yaml: no upstream) serves the built-in engine. */
describe('sigil measure self with the default config', () => {
  it('measures the built-in engine’s one model, from the demo model file start would make and load', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-measure-default-'));
    cpSync(join(import.meta.dirname, '../../config/sigil.yaml'), join(dir, 'config/sigil.yaml'));
    const result = spawnSync(process.execPath, [...SIGIL_FROM_SOURCES, 'measure', 'self'], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const [text, digest] = result.stdout.trimEnd().split('\n');
    const manifest = JSON.parse(text!) as { catalogue_sha256: unknown; models: unknown[] };
    const file = readFileSync(join(dir, '.sigil/models/demo-tiny-random.gguf'));
    expect(manifest.catalogue_sha256).toBeNull();
    expect(manifest.models).toEqual([{ id: 'demo-tiny-random', model_hash: `sha256:${createHash('sha256').update(file).digest('hex')}`, measured: true }]);
    expect(digest).toMatch(/^manifest_sha384 [0-9a-f]{96}$/);
  }, 180_000);
});
