import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readReferenceValues } from '../../src/verify/reference/load.ts';

const ROOT = join(import.meta.dirname, '../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

describe("the README's snippets work as written", () => {
  it('the attested-client snippet names a reference-values file the repository has, in the format the verifier reads', async () => {
    const named = [...README.matchAll(/reference: '([^']+)'/g)].map((m) => m[1]!);
    expect(named).toEqual(['config/reference-values.example.yaml']);
    expect(existsSync(join(ROOT, named[0]!))).toBe(true);
    const values = await readReferenceValues(join(ROOT, named[0]!));
    expect(values.snp?.measurement).toEqual(['7f51e17f72a04d5422cb2c00998166536019a217376f3aa45a630e59c805a599847ff250dbffcd07e1ba639771d6f05d']);
    expect(values.tdx?.mrtd).toEqual(['fd685522ce791dfef67414614eb07d03fc07a32c5a66f36288b329dab92b724b1564c73d436ffb9ea84488c51ac5a1c5']);
    expect(values.gpu).toBeUndefined();
  });

  it('every chat request in it bounds the answer with max_tokens, as the random demo model never stops on its own', () => {
    const requests = [...README.matchAll(/chat\.completions\.create\(([^\n]*)\)|-d '(\{"model"[^']*)'/g)]
      .map((m) => m[1] ?? m[2]!)
      .filter((request) => request.includes('messages'));
    expect(requests.length).toBe(3);
    for (const request of requests) expect(request).toMatch(/max_tokens"?: ?\d+/);
  });

  it('the tour sets every shell variable its snippets read, and the key under the name sigil verify and the OpenAI snippet read', () => {
    const tour = README.slice(README.indexOf('## A quick tour'), README.indexOf('\n## ', README.indexOf('## A quick tour') + 1));
    const shell = [...tour.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).join('\n');
    const set = new Set(['PWD', 'HOME', ...[...shell.matchAll(/^(?:export )?([A-Z_]+)=/gm)].map((m) => m[1]!)]);
    const read = new Set([...shell.matchAll(/\$\{?([A-Z_]+)/g)].map((m) => m[1]!));
    expect([...read].filter((name) => !set.has(name))).toEqual([]);
    expect(shell).toMatch(/^export SIGIL_API_KEY=/m);
    expect(tour).toContain('apiKey: process.env.SIGIL_API_KEY');
  });
});
