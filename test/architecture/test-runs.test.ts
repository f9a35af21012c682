import { globSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TestProjectInlineConfiguration } from 'vitest/config';
import full from '../../vitest.config.ts';
import image from '../image/vitest.config.ts';

const ROOT = resolve(import.meta.dirname, '../..');

/** The test files a project selects: its include globs less its exclude globs, from the repository's root. */
function selected(project: { test?: { include?: string[]; exclude?: string[] } }): string[] {
  return globSync(project.test?.include ?? [], { cwd: ROOT, exclude: project.test?.exclude ?? [] }).sort();
}

const projects = (full.test?.projects ?? []) as TestProjectInlineConfiguration[];
const project = (name: string) => projects.find((p) => p.test?.name === name)!;

describe('which run runs which test file (README, "Tests")', () => {
  it('`npm test` runs every test file but the measured image boot, which `npm run test:image` runs, each in one project', () => {
    const every = globSync('test/**/*.test.ts', { cwd: ROOT, exclude: ['**/node_modules/**'] }).sort();
    expect(every.length).toBeGreaterThan(200);
    expect(projects.map((p) => p.test?.name)).toEqual(['unit', 'system']);
    const unit = selected(project('unit'));
    const system = selected(project('system'));
    expect([...unit, ...system].sort()).toEqual(every.filter((file) => file !== 'test/image/boot.test.ts'));
    expect(unit.filter((file) => system.includes(file))).toEqual([]);
    expect(selected(image)).toContain('test/image/boot.test.ts');
  });

  it('`npm run test:unit` is the unit project of `npm test`, so moving a file out of the quick loop drops nothing', () => {
    expect(selected(project('unit')).length).toBeGreaterThan(100);
    expect(project('unit').test?.isolate).toBe(false);
    expect(project('system').test?.isolate).toBeUndefined();
  });
});
