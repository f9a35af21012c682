import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { runMeasure } from './run-measure.ts';
import { LaunchDigest } from '../../src/measure/gctx.ts';
import { readSevFirmwareLayout, type SectionType } from '../../src/measure/ovmf-sev-metadata.ts';
import { cmdlineDigest } from '../../src/measure/sev-hashes.ts';
import { snpLaunchDigest } from '../../src/measure/snp-launch-digest.ts';
import { vcpuSignature } from '../../src/measure/vcpu-types.ts';

const DIR = new URL('../vectors/measure/snp/', import.meta.url).pathname;

interface Vector {
  id: string;
  mode: string;
  inputs: Record<string, unknown>;
  expected_digest?: string;
  expected_error?: string;
  expected_parse?: { sections: [string, string, string][]; sev_hashes_table_gpa: string; sev_es_reset_eip: string };
}

const vectors = (JSON.parse(await readFile(join(DIR, 'snp-vectors.json'), 'utf8')) as { vectors: Vector[] }).vectors;
let work = '';
let emptyFile = '';

/** The fixture's path here; the two large SVSM fixtures are stored gzipped and unpacked once. */
async function fixture(path: string): Promise<string> {
  const plain = join(DIR, path);
  try {
    await readFile(plain);
    return plain;
  } catch {
    const out = join(work, path.replace(/\//g, '_'));
    await writeFile(out, gunzipSync(await readFile(`${plain}.gz`)));
    return out;
  }
}

/** The `sigil measure snp` arguments a vector's inputs stand for. */
async function argvOf(v: Vector): Promise<string[]> {
  const i = v.inputs;
  const argv = ['snp', '--digest', '--mode', v.mode, '--ovmf', await fixture(i.ovmf_file as string), '--vcpus', String(i.vcpus)];
  if (typeof i.vcpu_type === 'string') argv.push('--vcpu-type', i.vcpu_type);
  if (v.mode !== 'sev') argv.push('--guest-features', i.guest_features as string, '--vmm', (i.vmm_type as string).toLowerCase().replace('-rdx0', ''));
  if (typeof i.snp_ovmf_hash === 'string') argv.push('--ovmf-hash', i.snp_ovmf_hash);
  if (i.kernel !== null && i.kernel !== undefined) argv.push('--kernel', emptyFile);
  if (i.initrd !== null && i.initrd !== undefined) argv.push('--initrd', emptyFile);
  if (typeof i.append === 'string' && i.kernel) argv.push('--append', i.append);
  if (typeof i.svsm_file === 'string') argv.push('--svsm', await fixture(i.svsm_file), '--ovmf-vars-size', String(i.ovmf_vars_size));
  return argv;
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'sigil-measure-snp-'));
  emptyFile = join(work, 'empty');
  await writeFile(emptyFile, '');
});

describe('sigil measure snp reproduces every published launch digest', () => {
  const runnable = vectors.filter((v) => typeof v.inputs.ovmf_file === 'string' && ['snp', 'snp:svsm', 'seves', 'sev'].includes(v.mode));

  it('covers the file-based vectors of the collection', () => {
    expect(runnable.length).toBe(26);
  });

  for (const v of runnable) {
    it(v.id, async () => {
      const result = await runMeasure(await argvOf(v));
      if (v.expected_error !== undefined) {
        expect(result).toEqual({ code: 1, stdout: '', stderr: `sigil measure snp: ${v.expected_error} (ERR_MEASURE_FIRMWARE)\n` });
      } else {
        expect(result).toEqual({ code: 0, stdout: `${v.expected_digest}\n`, stderr: '' });
      }
    });
  }

  it('prints the launch digest of the OVMF pages alone, the value published for --ovmf-hash', async () => {
    const v = vectors.find((x) => x.mode === 'snp-ovmf-hash-only')!;
    const result = await runMeasure(['snp', '--only-ovmf', '--ovmf', await fixture(v.inputs.ovmf_file as string)]);
    expect(result).toEqual({ code: 0, stdout: `${v.expected_digest}\n`, stderr: '' });
  });

  it("reads dstack's synthetic firmware (a metadata header whose length field is 0) and digests its pages", async () => {
    const v = vectors.find((x) => x.mode === 'snp-ovmf-pages-only')!;
    const file = await fixture(v.inputs.ovmf_file as string);
    const layout = readSevFirmwareLayout(await readFile(file));
    const names: Record<number, string> = { 1: 'SNP_SEC_MEM', 2: 'SNP_SECRETS', 3: 'CPUID', 4: 'SVSM_CAA', 16: 'SNP_KERNEL_HASHES' };
    expect(layout.sections.map((s) => [`0x${s.gpa.toString(16)}`, `0x${s.size.toString(16)}`, names[s.type]])).toEqual(v.expected_parse!.sections);
    expect(layout.gpa).toBe(0xfffff000);
    expect(`0x${layout.sevHashesTableGpa!.toString(16)}`).toBe(v.expected_parse!.sev_hashes_table_gpa);
    expect(`0x${layout.sevEsResetEip!.toString(16)}`).toBe(v.expected_parse!.sev_es_reset_eip);
    expect(await runMeasure(['snp', '--only-ovmf', '--ovmf', file])).toEqual({ code: 0, stdout: `${v.expected_digest}\n`, stderr: '' });
  });

  it("matches dstack's measurement from published hashes and an explicit section list", () => {
    const v = vectors.find((x) => x.mode.startsWith('snp (precomputed-hash form'))!;
    const i = v.inputs as {
      base_cmdline: string;
      ovmf_hash: string;
      kernel_hash: string;
      initrd_hash: string;
      sev_hashes_table_gpa: number;
      sev_es_reset_eip: number;
      vcpus: number;
      vcpu_type: string;
      guest_features: number;
      ovmf_sections: { gpa: number; size: number; section_type: number }[];
    };
    const digest = snpLaunchDigest({
      layout: {
        gpa: 0,
        sections: i.ovmf_sections.map((s) => ({ gpa: s.gpa, size: s.size, type: s.section_type as SectionType })),
        sevHashesTableGpa: i.sev_hashes_table_gpa,
        sevEsResetEip: i.sev_es_reset_eip,
      },
      firmware: { ovmfDigest: Buffer.from(i.ovmf_hash, 'hex') },
      kernel: { kernel: Buffer.from(i.kernel_hash, 'hex'), initrd: Buffer.from(i.initrd_hash, 'hex'), cmdline: cmdlineDigest(i.base_cmdline) },
      vcpus: i.vcpus,
      vcpuSig: vcpuSignature(i.vcpu_type),
      guestFeatures: BigInt(i.guest_features),
      vmm: 'qemu',
    });
    expect(digest.toString('hex')).toBe(v.expected_digest);
  });

  it("updates the digest with one page exactly as dstack's published single-step vector", () => {
    const v = vectors.find((x) => x.mode.startsWith('primitive'))!;
    const ld = new LaunchDigest(Buffer.from(v.inputs.seed as string, 'hex'));
    ld.update(1, 0x1000, createHash('sha384').update('page').digest());
    expect(ld.digest.toString('hex')).toBe(v.expected_digest);
  });

  it('leaves no vector of the collection unrun', () => {
    const special = ['snp-ovmf-hash-only', 'snp-ovmf-pages-only'];
    const others = vectors.filter(
      (v) => !runnable.includes(v) && !special.includes(v.mode) && !v.mode.startsWith('snp (precomputed') && !v.mode.startsWith('primitive'),
    );
    expect(others.map((v) => v.id)).toEqual([]);
  });
});
