import { describe, expect, it } from 'vitest';
import { buildCatalogue } from '../../src/catalogue/catalogue.ts';
import { catalogueEntry } from '../support/sigil.ts';

const build = (extra: Record<string, unknown>) => buildCatalogue({ models: [{ ...catalogueEntry({ id: 'm' }, 0), ...extra }] }, 'models.yaml', ['main']);

describe('catalogue endpoints (SPEC 2b)', () => {
  it('default to every generative endpoint, not embeddings', () => {
    expect(build({}).byId.get('m')?.endpoints).toEqual(['chat', 'completions', 'responses']);
  });

  it('are taken as listed', () => {
    expect(build({ endpoints: ['embeddings'] }).byId.get('m')?.endpoints).toEqual(['embeddings']);
  });

  it.each([[['images']], [[]], [['chat', 'chat']], ['chat']])('refuse %j with a message naming the key', (endpoints) => {
    expect(() => build({ endpoints })).toThrow(/endpoints/);
  });
});
