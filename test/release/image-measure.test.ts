import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { measureCommand } from '../../src/cli/measure.ts';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';

/**
 * image/measure.sh and image/release-statement.sh on a stand-in for a built image (the full build takes 25
 * minutes): the test vectors' OVMF images as firmware, and a made-up kernel (a real PE/COFF image given a
 * Linux setup header) with a small initrd. What the scripts record must be what `sigil measure` computes.
 */
const vectors = new URL('../vectors/measure/', import.meta.url).pathname;
const image = new URL('../../image/', import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-image-measure-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const put = (name: string, data: string | Uint8Array) => {
  writeFileSync(join(work, name), data);
  return join(work, name);
};

const CMDLINE = 'console=ttyS0 ro sigil.verity_roothash=' + 'ab'.repeat(32);
const kernel = Buffer.from(readFileSync(join(vectors, 'pe/fwupdx64.efi.signed')));
kernel.write('HdrS', 0x202, 'latin1');
kernel.writeUInt16LE(0x20f, 0x206); // boot protocol 2.15
kernel.writeUInt32LE(0x7fffffff, 0x22c); // initrd_addr_max
put('vmlinuz', kernel);
put('initrd.img', Buffer.alloc(1000, 0x5a));
put('cmdline', `${CMDLINE}\n`);
put('root-hash', 'ab'.repeat(32));
put('rootfs.squashfs', 'squashfs stand-in');
put('rootfs.verity', 'verity stand-in');
const SELF = '5e'.repeat(48);
put('self-measurement', `${SELF}\n`);
const ovmf = join(vectors, 'snp/virtee-sev-snp-measure/fixtures/ovmf_AmdSev_suffix.bin');
const tdvf = put('OVMF.fd', gunzipSync(readFileSync(join(vectors, 'tdx/debian-ovmf/OVMF.fd.gz'))));

async function measure(argv: string[]): Promise<string> {
  let stdout = '';
  const code = await measureCommand(argv, { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: () => true } });
  expect(code).toBe(0);
  return stdout;
}

describe('image/measure.sh and image/release-statement.sh', () => {
  it('record, per VM shape of image/shapes.json, the registers sigil measure computes, and put them in the predicate', async () => {
    const env = { ...process.env, SIGIL_CLI: [process.execPath, ...SIGIL_FROM_SOURCES].join(' '), SIGIL_OVMF: ovmf, SIGIL_TDVF: tdvf };
    const { stdout } = await promisify(execFile)('bash', [join(image, 'measure.sh'), work], { env });
    const m = JSON.parse(stdout) as { targets: { platform: string; measurements: Record<string, string> }[]; cmdline: string; sigil_self_measurement: string };
    expect(m.cmdline).toBe(CMDLINE);
    expect(m.sigil_self_measurement).toBe(SELF);
    const common = ['--kernel', join(work, 'vmlinuz'), '--initrd', join(work, 'initrd.img'), '--append', CMDLINE, '--digest'];
    const snp = (
      await measure(['snp', '--ovmf', ovmf, '--vcpus', '4', '--vcpu-type', 'EPYC-v4', '--vmm', 'qemu', '--guest-features', '0x1', ...common])
    ).trim();
    const tdx = Object.fromEntries(
      (await measure(['tdx', '--firmware', tdvf, '--memory', '16G', ...common]))
        .trim()
        .split('\n')
        .map((l) => l.split(' ')),
    );
    expect(snp).toMatch(/^[0-9a-f]{96}$/);
    expect(Object.keys(tdx)).toEqual(['mrtd', 'rtmr1', 'rtmr2']);
    expect(m.targets.map((t) => [t.platform, t.measurements])).toEqual([
      ['sev-snp', { measurement: snp }],
      ['tdx', tdx],
    ]);

    put('measurements.json', stdout);
    const predicate = await promisify(execFile)('bash', [join(image, 'release-statement.sh'), work, 'v1.2.3'], {
      env: { ...env, SIGIL_OVMF_SOURCE: 'test vector', SIGIL_TDVF_SOURCE: 'test vector' },
    });
    const p = JSON.parse(predicate.stdout) as {
      version: string;
      sigil_self_measurement: string;
      targets: { platform: string; measurements: Record<string, string> }[];
    };
    expect(p.version).toBe('1.2.3');
    // The self-measurement image/build.sh computed (sigil measure self inside the image) is the release's.
    expect(p.sigil_self_measurement).toBe(SELF);
    expect(p.targets.map((t) => [t.platform, t.measurements])).toEqual([
      ['sev-snp', { measurement: snp }],
      ['tdx', tdx],
    ]);
  }, 120_000);
});
