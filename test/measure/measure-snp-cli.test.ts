import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runMeasure } from './run-measure.ts';
import { parseReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';

const FIXTURES = new URL('../vectors/measure/snp/virtee-sev-snp-measure/fixtures/', import.meta.url).pathname;
const AMDSEV = join(FIXTURES, 'ovmf_AmdSev_suffix.bin');
const OVMF_HASH = '086e2e9149ebf45abdc3445fba5b2da8270bdbb04094d7a2c37faaa4b24af3aa16aff8c374c2a55c467a50da6d466b74';
// virtee/sev-snp-measure test_snp_ovmf_hash_full_default: empty kernel and initrd, this command line
const FULL_DEFAULT = '803f691094946e42068aaa3a8f9e26a5c89f36f7b73ecfb28c653360fe4b3aba7e534442e7e1e17895dfe778d0228977';
const empty = join(mkdtempSync(join(tmpdir(), 'sigil-measure-cli-')), 'empty');
writeFileSync(empty, '');

const FULL_ARGS = [
  'snp',
  '--ovmf',
  AMDSEV,
  '--ovmf-hash',
  OVMF_HASH,
  '--kernel',
  empty,
  '--initrd',
  empty,
  '--append',
  'console=ttyS0 loglevel=7',
  '--vcpu-type',
  'EPYC-v4',
  '--guest-features',
  '0x21',
];

describe('sigil measure snp prints a reference-values file sigil verify reads', () => {
  it('pins exactly the computed measurement and nothing else', async () => {
    const result = await runMeasure(FULL_ARGS);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(parseReferenceValues(result.stdout)).toEqual({ snp: { measurement: [FULL_DEFAULT] } });
    expect(result.stdout).toContain('#   kernel sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n');
  });

  it('hashes the whole OVMF image itself when no published OVMF hash is given', async () => {
    const withImage = await runMeasure(FULL_ARGS.filter((a, i) => a !== '--ovmf-hash' && FULL_ARGS[i - 1] !== '--ovmf-hash'));
    expect(parseReferenceValues(withImage.stdout)).toEqual({ snp: { measurement: [FULL_DEFAULT] } });
  });

  it('takes the kernel and initrd as published SHA-256 digests instead of files', async () => {
    const sha = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
    const result = await runMeasure([
      'snp',
      '--digest',
      '--ovmf',
      AMDSEV,
      '--kernel-sha256',
      sha,
      '--initrd-sha256',
      sha,
      '--append',
      'console=ttyS0 loglevel=7',
      '--vcpu-sig',
      '0x800f12',
      '--guest-features',
      '33',
    ]);
    expect(result).toEqual({ code: 0, stdout: `${FULL_DEFAULT}\n`, stderr: '' });
  });

  it('is registered as `sigil measure` and describes every option under --help', () => {
    const run = spawnSync(process.execPath, [...SIGIL_FROM_SOURCES, 'measure', 'snp', '--help'], { encoding: 'utf8', timeout: 20_000 });
    expect(run.status).toBe(0);
    for (const option of [
      '--ovmf',
      '--ovmf-hash',
      '--mode',
      '--kernel',
      '--kernel-sha256',
      '--initrd',
      '--initrd-sha256',
      '--append',
      '--vcpus',
      '--vcpu-type',
      '--vcpu-sig',
      '--vcpu-family',
      '--guest-features',
      '--vmm',
      '--svsm',
      '--ovmf-vars-size',
      '--digest',
      '--only-ovmf',
    ]) {
      expect(run.stdout).toMatch(new RegExp(`^  ${option} `, 'm'));
    }
  });
});

describe('sigil measure snp refuses inputs it cannot measure, saying why', () => {
  it.each([
    ['an initrd without a kernel', ['--initrd', empty, '--vcpu-type', 'EPYC-v4'], 2, '--initrd and --append are measured only with a kernel'],
    ['no vCPU type', ['--kernel', empty], 2, 'the vCPU type is needed'],
    ['two ways to give the vCPU', ['--vcpu-type', 'EPYC-v4', '--vcpu-sig', '0x800f12'], 2, 'give the vCPU as one of'],
    ['an unknown hypervisor', ['--vcpu-type', 'EPYC-v4', '--vmm', 'xen'], 2, '--vmm must be one of qemu, ec2, gce, ec2-legacy, got "xen"'],
    ['an OVMF hash of the wrong length', ['--vcpu-type', 'EPYC-v4', '--ovmf-hash', 'abcd'], 2, '--ovmf-hash must be 96 hex digits (48 bytes), got "abcd"'],
    ['zero vCPUs', ['--vcpu-type', 'EPYC-v4', '--vcpus', '0'], 1, 'the number of vCPUs must be a whole number of at least 1, got 0 (ERR_MEASURE_INPUT)'],
    ['an unknown vCPU model', ['--vcpu-type', 'EPYC-v9'], 1, 'unknown vCPU type "EPYC-v9"'],
  ])('%s', async (_name, args, code, message) => {
    const result = await runMeasure(['snp', '--ovmf', AMDSEV, ...args]);
    expect(result.code).toBe(code);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(message);
  });

  it('names a file it cannot read and exits 3', async () => {
    const result = await runMeasure(['snp', '--ovmf', '/nonexistent/OVMF.fd', '--vcpu-type', 'EPYC-v4']);
    expect(result).toEqual({ code: 3, stdout: '', stderr: 'sigil measure snp: cannot read the OVMF image /nonexistent/OVMF.fd: ENOENT\n' });
  });

  it('refuses a firmware image that is not whole pages', async () => {
    const odd = join(mkdtempSync(join(tmpdir(), 'sigil-measure-cli-')), 'odd.fd');
    writeFileSync(odd, readFileSync(AMDSEV).subarray(1));
    const result = await runMeasure(['snp', '--ovmf', odd, '--vcpu-type', 'EPYC-v4']);
    expect(result).toEqual({
      code: 1,
      stdout: '',
      stderr: 'sigil measure snp: the firmware image is 4095 bytes, not a whole number of 4 KiB pages (ERR_MEASURE_FIRMWARE)\n',
    });
  });
});

describe('sigil measure names its platforms', () => {
  it('prints its usage and exits 2 without one, and refuses one it does not know', async () => {
    const none = await runMeasure([]);
    expect([none.code, none.stdout, none.stderr.startsWith('usage: sigil measure [options] [command]\n')]).toEqual([2, '', true]);
    expect(none.stderr.match(/^ {2}(self|snp|tdx) /gm)).toEqual(['  self ', '  snp ', '  tdx ']);
    const sgx = await runMeasure(['sgx']);
    expect([sgx.code, sgx.stdout, sgx.stderr.split('\n')[0]]).toEqual([2, '', 'sigil measure: unknown subcommand "sgx": give one of self, snp, tdx']);
  });
});
