import { globSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ViteUserConfig } from 'vitest/config';
import full from '../../vitest.config.ts';
import image from '../image/vitest.config.ts';
import unit from '../../vitest.unit.config.ts';

const ROOT = resolve(import.meta.dirname, '../..');

/** The test files a vitest configuration selects: its include globs less its exclude globs, from the repository's root. */
function selected(config: ViteUserConfig): string[] {
  const exclude = config.test?.exclude ?? [];
  return globSync(config.test?.include ?? [], { cwd: ROOT, exclude }).sort();
}

describe('which run runs which test file (README, "Tests")', () => {
  it('`npm test` runs every test file but the measured image boot, which `npm run test:image` runs', () => {
    const every = globSync('test/**/*.test.ts', { cwd: ROOT, exclude: ['**/node_modules/**'] }).sort();
    expect(every.length).toBeGreaterThan(200);
    expect(selected(full)).toEqual(every.filter((file) => file !== 'test/image/boot.test.ts'));
    expect(selected(image)).toContain('test/image/boot.test.ts');
  });

  it('`npm run test:unit` runs only files `npm test` runs too, so moving a file out of the quick loop drops nothing', () => {
    const quick = selected(unit);
    const everything = new Set(selected(full));
    expect(quick.length).toBeGreaterThan(100);
    expect(quick.filter((file) => !everything.has(file))).toEqual([]);
  });
});
