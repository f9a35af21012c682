import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';

/** The engine README's sigil.yaml and models.yaml for vLLM, llama.cpp's server or Ollama, checked as written. */
const README = readFileSync(join(import.meta.dirname, '../../packages/engine/README.md'), 'utf8');
const block = (first: string) => [...README.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith(first));

describe("the engine README's upstream example", () => {
  it('passes sigil config check as written, with a keys file beside it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-engine-readme-'));
    writeFileSync(join(dir, 'sigil.yaml'), block('# sigil.yaml')!);
    writeFileSync(join(dir, 'models.yaml'), block('# models.yaml')!);
    writeFileSync(join(dir, 'api-keys'), '');
    const result = spawnSync(process.execPath, [...SIGIL_FROM_SOURCES, 'config', 'check', '--config', join(dir, 'sigil.yaml')], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('catalogue: 1 model(s)');
    expect(result.stdout).toContain('qwen2.5-7b-instruct');
  });
});
