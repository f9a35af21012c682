import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { catalogueSchema } from '../../src/catalogue/schema.ts';
import { configSchema } from '../../src/config/schema.ts';

/** docs/image.md, "vLLM or SGLang in the same VM": the configuration disk's two files, as printed, are ones Sigil accepts. */
const doc = readFileSync(new URL('../../docs/image.md', import.meta.url), 'utf8');
const section = doc.slice(doc.indexOf('## vLLM or SGLang in the same VM'), doc.indexOf('## Reproducibility'));
const yamlBlock = (firstLine: string) => {
  const block = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith(firstLine));
  if (block === undefined) throw new Error(`docs/image.md prints no YAML block starting "${firstLine}"`);
  return parse(block) as unknown;
};

describe('the vLLM recipe of docs/image.md', () => {
  it('configures Sigil for an engine on loopback in the same VM, with GPU evidence required', () => {
    const config = configSchema.parse(yamlBlock('# /config/sigil.yaml'));
    expect(Object.values(config.upstreams).map((u) => new URL(u.url).hostname)).toEqual(['127.0.0.1']);
    expect(config.upstreams.vllm?.allow_outside_vm).toBe(false);
    expect(config.attestation).toMatchObject({ provider: 'auto', gpu: 'required' });
    expect(config.tls.mode).not.toBe('off');
  });

  it('names the weights on the model disk, so Sigil hashes them at start', () => {
    const catalogue = catalogueSchema.parse(yamlBlock('# /config/models.yaml'));
    expect(catalogue.models.map((m) => [m.id, m.weights])).toEqual([['qwen3-32b', '/models/qwen3-32b']]);
  });

  it('runs the engine by its container image digest, on loopback', () => {
    expect(section).toMatch(/podman run [^`]*docker\.io\/vllm\/vllm-openai@sha256:DIGEST /);
    expect(section).toContain('--host 127.0.0.1 --port 8000');
  });
});
