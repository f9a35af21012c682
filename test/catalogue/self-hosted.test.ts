import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadCatalogue } from '../../src/catalogue/catalogue.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

const HASH = 'sha256:' + 'ab'.repeat(32);
/** What a self-hosted model has: no price, no region, no reasoning flag. */
const LOCAL = { id: 'local-llama', name: 'Local Llama', provider: 'meta', created: 0, context_window: 8192, model_hash: HASH };

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['local-llama'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'local-llama' }] });
  writeFileSync(join(sigil.dir, 'models.yaml'), stringify({ models: [LOCAL] }));
  await sigil.reload();
});
afterAll(async () => {
  await sigil.close(0);
  await engine.close();
});

describe('a self-hosted model in the catalogue', () => {
  it('needs no pricing, regions or reasoning, and /v1/models?detail=true shows the defaults: free, local, no reasoning', async () => {
    const res = await fetch(`${sigil.url}/v1/models/local-llama?detail=true`, { headers: { authorization: `Bearer ${sigil.key}` } });
    expect(res.status).toBe(200);
    const model = (await res.json()) as Record<string, unknown>;
    expect([model.reasoning, model.regions, model.pricing]).toEqual([false, ['local'], { input_per_mtok: 0, output_per_mtok: 0, currency: 'USD' }]);
  });
});

describe('a required catalogue field that is missing', () => {
  it.each(['id', 'name', 'provider', 'created', 'context_window', 'model_hash'])('%s: the error gives an example value', (field) => {
    const path = join(sigil.dir, `without-${field}.yaml`);
    writeFileSync(path, stringify({ models: [Object.fromEntries(Object.entries(LOCAL).filter(([k]) => k !== field))] }));
    expect(() => loadCatalogue(path, ['e'])).toThrow(new RegExp(`^${path}: models\\.0\\.${field}: missing: this setting is required, e\\.g\\. \`${field}: `));
  });

  it('pricing given without a price: the error gives an example', () => {
    const path = join(sigil.dir, 'half-priced.yaml');
    writeFileSync(path, stringify({ models: [{ ...LOCAL, pricing: { output_per_mtok: 1 } }] }));
    expect(() => loadCatalogue(path, ['e'])).toThrow(
      `${path}: models.0.pricing.input_per_mtok: missing: this setting is required, e.g. \`input_per_mtok: 0\` (per million tokens; leave out \`pricing\` for a free model)`,
    );
  });
});
