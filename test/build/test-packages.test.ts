import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SCRIPT = fileURLToPath(new URL('../../scripts/test-packages.mjs', import.meta.url));
const PACKAGE_JSON = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };

/** A PATH whose dpkg reports `missing` as not installed, whose `id -u` prints `uid`, and whose apt-get logs its arguments. */
function fakeSystem(missing: string[], uid: number): { path: string; aptLog: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-pkgs-'));
  const aptLog = join(dir, 'apt-get.log');
  const script = (name: string, body: string) => {
    writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  };
  script(
    'dpkg',
    `[ "$1" = --version ] && exit 0\ncase " ${missing.join(' ')} " in *" $2 "*) echo "dpkg-query: package '$2' is not installed" >&2; exit 1;; esac\necho "Package: $2"\necho "Status: install ok installed"`,
  );
  script('id', `echo ${uid}`);
  script('apt-get', `echo "$@" >> ${aptLog}`);
  return { path: dir, aptLog };
}

function runCheck(path: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: path };
  delete env.SIGIL_SKIP_PACKAGE_CHECK;
  const result = spawnSync(process.execPath, [SCRIPT], { encoding: 'utf8', env });
  return { code: result.status, stderr: result.stderr };
}

describe('npm test checks the Debian packages the tests need before running them', () => {
  it("runs the check first, as npm test's pretest script (after the Node version check)", () => {
    expect(PACKAGE_JSON.scripts.pretest).toBe('node scripts/check-node.mjs && node scripts/test-packages.mjs');
  });

  it('as a user, stops at once naming the exact command that installs what is missing', () => {
    const system = fakeSystem(['haproxy', 'pebble'], 1000);
    const result = runCheck(system.path);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('not installed: pebble (ACME certificates), haproxy (a TLS load balancer in front of encrypted bodies).');
    expect(result.stderr).toContain('    sudo apt-get update && sudo apt-get install -y pebble haproxy\n');
  });

  it('as root, installs what is missing with apt-get and goes on', () => {
    const system = fakeSystem(['redis-server', 'chromium'], 0);
    const result = runCheck(system.path);
    expect(result.code).toBe(0);
    expect(readFileSync(system.aptLog, 'utf8')).toBe('update -qq\ninstall -y -qq redis-server chromium\n');
  });

  it('says nothing and installs nothing when every package is there', () => {
    const system = fakeSystem([], 0);
    const result = runCheck(system.path);
    expect(result).toEqual({ code: 0, stderr: '' });
    expect(() => readFileSync(system.aptLog)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});
