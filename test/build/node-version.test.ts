import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as { engines: { node: string }; scripts: Record<string, string> };

/** Runs scripts/check-node.mjs as if on Node `version`. */
function checkNodeAs(version: string) {
  const pretend = `data:text/javascript,Object.defineProperty(process.versions,"node",{value:"${version}"});Object.defineProperty(process,"version",{value:"v${version}"});`;
  return spawnSync(process.execPath, ['--import', pretend, 'scripts/check-node.mjs'], { cwd: ROOT, encoding: 'utf8' });
}

describe('the Node version is checked before anything is installed or built', () => {
  it('npm install refuses an older Node at once: engine-strict, with the engines package.json asks', () => {
    expect(readFileSync(`${ROOT}/.npmrc`, 'utf8')).toMatch(/^engine-strict=true$/m);
    expect(pkg.engines.node).toBe('>=24.11');
  });

  it('npm start and npm test say in one line what to install on Node 20, before building', () => {
    expect(pkg.scripts.prestart!.startsWith('node scripts/check-node.mjs && ')).toBe(true);
    expect(pkg.scripts.pretest!.startsWith('node scripts/check-node.mjs && ')).toBe(true);
    const old = checkNodeAs('20.20.2');
    expect(old.status).toBe(1);
    expect(old.stderr).toBe(
      'sigil: needs Node 24.11 or later (Node 24 LTS); this is Node v20.20.2. Install Node 24 LTS (https://nodejs.org/ or `nvm install 24`), then run npm install again.\n',
    );
    expect(checkNodeAs('24.10.0').status).toBe(1);
    const current = checkNodeAs('24.11.0');
    expect([current.status, current.stderr]).toEqual([0, '']);
  });
});
