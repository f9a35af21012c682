#!/usr/bin/env node
// Runs before `npm test` (its pretest script): the tests start real servers (Redis, pebble, haproxy,
// nginx, testssl.sh, chromium) and build a stand-in NVML and /dev/sev-guest with gcc, so a missing package would fail or
// skip tests far into the run. As root, this installs what is missing; otherwise it stops at once and
// prints the exact command. SIGIL_SKIP_PACKAGE_CHECK=1 skips the check (those tests then fail).
import { spawnSync } from 'node:child_process';

/** Debian packages the tests need, and what each is for. */
const PACKAGES = {
  'redis-server': 'fleet mode',
  pebble: 'ACME certificates',
  haproxy: 'a TLS load balancer in front of encrypted bodies',
  nginx: 'a TLS terminator in front of Sigil',
  'testssl.sh': 'the TLS settings audit',
  chromium: 'the trust page',
  gcc: 'the stand-in GPU library and /dev/sev-guest',
  'linux-libc-dev': "the kernel's sev-guest.h the stand-in /dev/sev-guest is built from",
  openssl: 'test certificates',
  curl: 'curl through sigil connect',
  'python3-httpx': 'Python (httpx) through sigil connect',
  'python3-requests': 'Python (requests) through sigil connect',
};

/** What `npm run test:image` needs besides (`--image`): it builds the measured image and boots it under QEMU. */
const IMAGE_PACKAGES = {
  mmdebstrap: 'the root file system of the image',
  'squashfs-tools': 'the squashfs root and model disk',
  'cryptsetup-bin': 'dm-verity hash trees (veritysetup)',
  cpio: 'the initrd',
  zstd: 'compressed kernel modules',
  'qemu-system-x86': 'booting the image',
  ovmf: 'the firmware the release measurements are computed for',
};
const wanted = process.argv.includes('--image') ? IMAGE_PACKAGES : PACKAGES;

const run = (command, args, options = {}) => spawnSync(command, args, { encoding: 'utf8', ...options });

function main() {
  if (process.env.SIGIL_SKIP_PACKAGE_CHECK === '1') return 0;
  const dpkg = run('dpkg', ['--version']);
  const names = Object.keys(wanted);
  if (dpkg.error !== undefined || dpkg.status !== 0) {
    process.stderr.write(
      `npm test: this is not a Debian-based system (no dpkg), so the packages the tests need cannot be checked: ${names.join(', ')}.\n` +
        'Install their equivalents, then run `SIGIL_SKIP_PACKAGE_CHECK=1 npm test`.\n',
    );
    return 1;
  }
  const missing = names.filter((name) => !/^Status: install ok installed$/m.test(run('dpkg', ['-s', name]).stdout ?? ''));
  if (missing.length === 0) return 0;
  const install = `apt-get install -y ${missing.join(' ')}`;
  const why = missing.map((name) => `${name} (${wanted[name]})`).join(', ');
  if (run('id', ['-u']).stdout?.trim() !== '0') {
    process.stderr.write(
      `npm test: the tests need Debian packages that are not installed: ${why}.\nInstall them, then run npm test again:\n\n    sudo apt-get update && sudo ${install}\n\n`,
    );
    return 1;
  }
  process.stderr.write(`npm test: installing the Debian packages the tests need: ${why}\n`);
  for (const args of [
    ['update', '-qq'],
    ['install', '-y', '-qq', ...missing],
  ]) {
    const step = run('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    if (step.status !== 0) {
      process.stderr.write(`npm test: \`apt-get ${args.join(' ')}\` failed; run it yourself:\n\n    apt-get update && ${install}\n\n`);
      return 1;
    }
  }
  return 0;
}

process.exitCode = main();
