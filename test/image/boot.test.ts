import { execFile, execFileSync } from 'node:child_process';
import { createHash, generateKeyPairSync } from 'node:crypto';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
  closeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { hashApiKey } from '../../src/auth/keys-file.ts';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';
import { bootPastInitrd, bootVm, tail, waitForReady, type Vm } from './vm.ts';

/**
 * The measured image, end to end (docs/image.md, "Test"): image/build.sh builds it from this tree, QEMU boots it by
 * measured direct boot with user-mode networking, and a client on the host reaches Sigil through the forwarded port,
 * chats with the built-in engine and the model of the verified model disk, and verifies the receipt. Run with
 * `npm run test:image` (not part of `vitest run`: it builds a Debian root and boots VMs under TCG, about ten minutes).
 * A missing tool fails it; SIGIL_SKIP_IMAGE_TEST=1 skips it. SIGIL_IMAGE_OUT=DIR keeps the image in DIR (built there
 * when DIR holds none), SIGIL_IMAGE_KVM=1 boots with KVM.
 */
const skip = process.env.SIGIL_SKIP_IMAGE_TEST === '1';
const repo = new URL('../../', import.meta.url).pathname;
const TOOLS = ['mmdebstrap', 'mksquashfs', 'unsquashfs', 'veritysetup', 'cpio', 'zstd', 'qemu-system-x86_64'];
const KEY = 'sk-sigil-image-test-key';
/**
 * One boot under TCG on a shared two-core machine: the kernel, the full read of the root and systemd take 1-2 minutes,
 * then Sigil and its engine (two Node processes) several more; the three VMs of the test boot one after another.
 */
const BOOT_BUDGET_MS = 20 * 60 * 1000;
const run = promisify(execFile);

const work = mkdtempSync(join(tmpdir(), 'sigil-image-test-'));
/** SIGIL_IMAGE_OUT=DIR: the image in DIR, built there first if DIR holds none (and kept); else a fresh build, removed after. */
const out = process.env.SIGIL_IMAGE_OUT ?? join(work, 'out');
const vms: Vm[] = [];
afterAll(async () => {
  await Promise.all(vms.map((vm) => vm.stop()));
  rmSync(work, { recursive: true, force: true });
});

let boots = 0;

/** Boots a VM with these disks, once more if the emulator crashed it before its initrd ran (bootPastInitrd). */
function boot(disks: { config?: string; rootfs?: string }, name: string): Promise<Vm> {
  return bootPastInitrd(async () => {
    const vm = await bootVm({ out, ...disks }, join(work, `${name}-${++boots}.serial.log`));
    vms.push(vm);
    return vm;
  }, BOOT_BUDGET_MS);
}

/**
 * A copy of the root with one bit flipped in a block of a gzip file under /usr/share/doc: nothing reads it while
 * booting, and squashfs stores a block that does not compress as it is, so the file's bytes are found in the image.
 */
async function corruptedRoot(): Promise<string> {
  const docs = join(work, 'docs');
  await run('unsquashfs', ['-no-xattrs', '-d', docs, join(out, 'rootfs.squashfs'), 'usr/share/doc']);
  const image = readFileSync(join(out, 'rootfs.squashfs'));
  let offset = -1;
  for (const pkg of readdirSync(join(docs, 'usr/share/doc'))) {
    const dir = join(docs, 'usr/share/doc', pkg);
    for (const name of statSync(dir).isDirectory() ? readdirSync(dir) : []) {
      const file = join(dir, name);
      if (!name.endsWith('.gz') || !statSync(file).isFile() || statSync(file).size < 16384) continue;
      const at = image.indexOf(readFileSync(file).subarray(0, 8192));
      if (at >= 0) {
        offset = at + 5000;
        break;
      }
    }
    if (offset >= 0) break;
  }
  if (offset < 0) throw new Error('no block of a file under /usr/share/doc is stored uncompressed in the root');
  const corrupted = join(work, 'rootfs-corrupted.squashfs');
  copyFileSync(join(out, 'rootfs.squashfs'), corrupted);
  const fd = openSync(corrupted, 'r+');
  writeSync(fd, Buffer.from([image[offset]! ^ 0x01]), 0, 1, offset);
  closeSync(fd);
  return corrupted;
}

/**
 * A configuration disk as an operator makes it (image/config-disk.sh): the development configuration of this test
 * (no hardware TEE here; the image's shipped configuration requires one), a catalogue naming `modelId` for the
 * model disk's GGUF with its SHA-256, and the API key hash of KEY.
 */
async function configDisk(modelId: string, modelHash: string): Promise<string> {
  const dir = join(work, `config-${modelId}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'sigil.yaml'),
    stringify({
      listen: { host: '0.0.0.0', port: 8080 },
      catalogue: 'models.yaml',
      auth: { keys_file: 'api-keys' },
      attestation: { provider: 'none' },
      engine: { model: '/models/demo-tiny-random.gguf', threads: 1, parallel: 1, context_size: 512, start_timeout_ms: BOOT_BUDGET_MS },
    }),
  );
  const model = {
    id: modelId,
    name: `Appliance model ${modelId}`,
    provider: 'local',
    created: 0,
    context_window: 512,
    reasoning: false,
    regions: ['local'],
    pricing: { input_per_mtok: 0, output_per_mtok: 0, currency: 'USD' },
    upstream_model: 'demo-tiny-random',
    weights: '/models/demo-tiny-random.gguf',
    model_hash: modelHash,
    endpoints: ['chat', 'completions'],
  };
  writeFileSync(join(dir, 'models.yaml'), stringify({ models: [model] }));
  writeFileSync(join(dir, 'api-keys'), `sha256:${hashApiKey(KEY)} 2026-01-01T00:00:00Z image-test\n`);
  const disk = join(work, `config-${modelId}.img`);
  await run('bash', [join(repo, 'image/config-disk.sh'), dir, disk]);
  return disk;
}

let unpackedRoot: Promise<string> | undefined;

/**
 * What Sigil in the VM measures at start for a configuration disk (the manifest a TEE deployment reports and extends
 * into RTMR3): `sigil measure self --config /config/sigil.yaml`, run in the image's own root file system (unpacked
 * once, with the model disk at /models and the configuration disk's files at /config) as sigil.service runs Sigil.
 */
async function measureSelf(configDir: string): Promise<{ manifestSha384: string; configSha256: string }> {
  unpackedRoot ??= (async () => {
    const root = join(work, 'root-full');
    await run('unsquashfs', ['-no-xattrs', '-d', root, join(out, 'rootfs.squashfs')], { maxBuffer: 64 * 1024 * 1024 });
    await run('unsquashfs', ['-no-xattrs', '-f', '-d', join(root, 'models'), join(out, 'model.img')]);
    return root;
  })();
  const root = await unpackedRoot;
  rmSync(join(root, 'config'), { recursive: true, force: true });
  cpSync(configDir, join(root, 'config'), { recursive: true });
  const { stdout } = await run('chroot', [
    root,
    '/usr/bin/env',
    '-i',
    'NODE_ENV=production',
    '/bin/sh',
    '-c',
    'cd /app && exec /usr/local/bin/node --disable-sigusr1 /app/bin/sigil.js measure self --config /config/sigil.yaml',
  ]);
  const manifest = JSON.parse(stdout.split('\n')[0]!) as { config_sha256: string };
  return { manifestSha384: /^manifest_sha384 ([0-9a-f]{96})$/m.exec(stdout)![1]!, configSha256: manifest.config_sha256 };
}

async function servedModels(vm: Vm): Promise<string[]> {
  const r = await fetch(`${vm.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } });
  expect(r.status).toBe(200);
  return ((await r.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
}

async function startDocument(vm: Vm): Promise<{ policy_hash: string; manifest_sha384: string | null }> {
  const r = await fetch(`${vm.url}/v1/verify/attestation`);
  expect(r.status).toBe(200);
  return ((await r.json()) as { binding: { policy_hash: string; manifest_sha384: string | null } }).binding;
}

describe.skipIf(skip)('the measured image under QEMU (npm run test:image)', () => {
  let modelHash = '';
  let rootHash = '';
  let disks: { a: string; b: string; corrupted: string } | undefined;
  let vmA: Vm | undefined;
  const seen: Record<string, { policy_hash: string; manifest_sha384: string | null }> = {};
  const measured: { a?: { manifestSha384: string; configSha256: string } } = {};

  beforeAll(
    async () => {
      const missing = TOOLS.filter((tool) => {
        try {
          execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
          return false;
        } catch {
          return true;
        }
      });
      if (missing.length > 0)
        throw new Error(
          `missing ${missing.join(', ')}: apt-get install mmdebstrap squashfs-tools cryptsetup-bin cpio zstd qemu-system-x86 (or SIGIL_SKIP_IMAGE_TEST=1)`,
        );
      if (process.getuid?.() !== 0) throw new Error('image/build.sh runs as root (mmdebstrap, chroot); or SIGIL_SKIP_IMAGE_TEST=1');
      if (!existsSync(join(out, 'measurements.json'))) {
        const started = Date.now();
        await run('bash', [join(repo, 'image/build.sh'), out], { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, TMPDIR: work } });
        process.stdout.write(`image/build.sh: ${Math.round((Date.now() - started) / 1000)} s\n`);
      }
      modelHash = readFileSync(join(out, 'model-sha256'), 'utf8').trim();
      rootHash = readFileSync(join(out, 'root-hash'), 'utf8').trim();
      const [a, b, corrupted] = await Promise.all([configDisk('appliance-a', modelHash), configDisk('appliance-b', modelHash), corruptedRoot()]);
      disks = { a, b, corrupted };
    },
    40 * 60 * 1000,
  );

  it('puts every module boot needs in the initrd, and measures the root and model disks on the command line', () => {
    const listing = execFileSync('sh', ['-c', `gzip -dc '${join(out, 'initrd.img')}' | cpio -t --quiet`], { encoding: 'utf8' });
    for (const ko of ['virtio_blk.ko', 'dm-mod.ko', 'dm-verity.ko', 'squashfs.ko']) expect(listing).toContain(`lib/modules/${ko}`);
    const cmdline = readFileSync(join(out, 'cmdline'), 'utf8');
    expect(cmdline).toContain(`sigil.verity_roothash=${rootHash}`);
    expect(cmdline).toContain(`sigil.model_roothash=${readFileSync(join(out, 'model-root-hash'), 'utf8').trim()}`);
    const measurements = JSON.parse(readFileSync(join(out, 'measurements.json'), 'utf8')) as Record<string, unknown>;
    expect(measurements.model_sha256).toBe(modelHash);
  });

  it('holds no file of the build host, the native modules Sigil loads, and no node_modules above the artifact', async () => {
    const root = join(work, 'unpacked');
    await run('unsquashfs', ['-no-xattrs', '-d', root, join(out, 'rootfs.squashfs'), 'etc', 'app']);
    expect(existsSync(join(root, 'etc/resolv.conf'))).toBe(false);
    expect(readFileSync(join(root, 'etc/hostname'), 'utf8')).toBe('sigil\n');
    expect(readFileSync(join(root, 'etc/hosts'), 'utf8')).toBe(readFileSync(join(repo, 'image/rootfs/etc/hosts'), 'utf8'));
    expect(readFileSync(join(root, 'etc/machine-id'), 'utf8')).toBe('');
    expect(existsSync(join(root, 'etc/network/interfaces'))).toBe(false);
    expect(existsSync(join(root, 'etc/systemd/system/multi-user.target.wants/systemd-networkd.service'))).toBe(true);
    expect(statSync(join(root, 'app/dist/addons/koffi.node')).size).toBeGreaterThan(0);
    expect(statSync(join(root, 'app/engine/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node')).size).toBeGreaterThan(0);
    // A TEE start refuses a node_modules folder the bundle could resolve from (docs/attestation.md, "What is measured").
    expect(existsSync(join(root, 'app/node_modules'))).toBe(false);
    expect(existsSync(join(root, 'app/dist/node_modules'))).toBe(false);
  });

  it(
    'boots, serves the model its configuration disk names, and a client verifies the chat and its receipt',
    async () => {
      // One VM at a time: three at once under TCG loaded the machine until a guest kernel crashed in the emulator.
      const vm = (vmA = await boot({ config: disks!.a }, 'a'));
      const times = await waitForReady(vm, BOOT_BUDGET_MS);
      const s = (ms: number | undefined) => (ms === undefined ? 'not seen' : `${Math.round(ms / 1000)} s`);
      process.stdout.write(`boot under QEMU: login prompt after ${s(times.loginMs)}, Sigil ready after ${s(times.readyMs)}\n`);
      expect(vm.console()).toContain(`sigil-initrd: verified root ${rootHash}`);
      expect(await servedModels(vm)).toEqual(['appliance-a']);

      const verify = await run(process.execPath, [...SIGIL_FROM_SOURCES, 'verify', '-v', '--url', vm.url, '--model', 'appliance-a', '--allow-no-tee'], {
        env: { ...process.env, SIGIL_API_KEY: KEY },
      }).catch((error: { stdout?: string; stderr?: string }) => {
        throw new Error(`sigil verify failed:\n${error.stdout ?? ''}${error.stderr ?? ''}\nVM console:\n${tail(vm.console())}`);
      });
      expect(verify.stdout).toMatch(/^PASS live\.request — JSON completion from appliance-a/m);
      expect(verify.stdout).toMatch(/^PASS receipt\.signature — /m);
      expect(verify.stdout).toContain(`PASS policy.model — the policy declares appliance-a with model_hash ${modelHash}`);
      // No hardware here: the manifest the VM reports is shown, and waived with the missing TEE, never passed unseen.
      expect(verify.stdout).toMatch(
        /^verified with waivers: \d+ checks passed; 4 waived \(attestation\.tls_key, attestation\.tee, attestation\.manifest, receipt\.tee\)$/m,
      );
      seen.a = await startDocument(vm);
    },
    BOOT_BUDGET_MS + 120_000,
  );

  it(
    "passes a stranger's check against a release manifest made from this build and signed (sigil verify --release)",
    async () => {
      const vm = vmA!;
      const rel = join(work, 'release');
      mkdirSync(rel, { recursive: true });
      // This machine has no firmware of a VM host: the SEV-SNP target is measured with the test vectors' AmdSev OVMF.
      const ovmf = join(repo, 'test/vectors/measure/snp/virtee-sev-snp-measure/fixtures/ovmf_AmdSev_suffix.bin');
      // The release states the self-measurement of this deployment: the image with its configuration disk.
      measured.a = await measureSelf(join(work, 'config-appliance-a'));
      const env = {
        ...process.env,
        SIGIL_OVMF: ovmf,
        SIGIL_OVMF_SOURCE: 'virtee/sev-snp-measure test fixture (test vector)',
        SIGIL_SELF_MEASUREMENT: measured.a.manifestSha384,
      };
      writeFileSync(join(rel, 'measurements.json'), (await run('bash', [join(repo, 'image/measure.sh'), out], { env })).stdout);
      const predicate = JSON.parse((await run('bash', [join(repo, 'image/release-statement.sh'), rel, 'v0.1.0'], { env })).stdout) as {
        image: { root_hash: string };
        sigil_self_measurement: string;
      };
      expect(predicate.image.root_hash).toBe(rootHash);
      expect(predicate.sigil_self_measurement).toBe(measured.a.manifestSha384);
      const rootfsSha256 = createHash('sha256')
        .update(readFileSync(join(out, 'rootfs.squashfs')))
        .digest('hex');
      const statement = {
        _type: 'https://in-toto.io/Statement/v1',
        subject: [{ name: 'rootfs.squashfs', digest: { sha256: rootfsSha256 } }],
        predicateType: 'https://sigil.dev/release-manifest/v1',
        predicate,
      };
      writeFileSync(join(rel, 'statement.json'), JSON.stringify(statement));
      const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      writeFileSync(join(rel, 'key.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
      writeFileSync(join(rel, 'pub.pem'), publicKey.export({ type: 'spki', format: 'pem' }));
      const cli = [...SIGIL_FROM_SOURCES];
      await run(process.execPath, [...cli, 'release', 'sign', '--key', join(rel, 'key.pem'), '--out', join(rel, 'bundle.json'), join(rel, 'statement.json')]);
      const verify = await run(
        process.execPath,
        [
          ...cli,
          'verify',
          '-v',
          '--url',
          vm.url,
          '--model',
          'appliance-a',
          '--allow-no-tee',
          '--release',
          join(rel, 'bundle.json'),
          '--key',
          join(rel, 'pub.pem'),
        ],
        { env: { ...process.env, SIGIL_API_KEY: KEY } },
      ).catch((error: { stdout?: string; stderr?: string }) => {
        throw new Error(`sigil verify --release failed:\n${error.stdout ?? ''}${error.stderr ?? ''}`);
      });
      expect(verify.stdout).toMatch(/^PASS release\.signature — /m);
      expect(verify.stdout).toContain(`PASS release.statement — a Sigil release manifest for version 0.1.0: image root hash ${rootHash}`);
      expect(verify.stdout).toMatch(/^PASS receipt\.signature — /m);
      // The stranger's comparison: the manifest the running Sigil reports is the one computed from the image's own
      // bytes with this configuration disk, and the release states it.
      expect(seen.a?.manifest_sha384).toBe(measured.a.manifestSha384);
      expect(verify.stdout).toMatch(new RegExp(`^PASS attestation\\.manifest — .*${measured.a.manifestSha384}`, 'm'));
      expect(verify.stdout).toMatch(/^verified with waivers: /m);
      await vm.stop();
    },
    10 * 60 * 1000,
  );

  it(
    'serves another configuration disk as configured, and the manifest Sigil measures and the policy it binds change with it',
    async () => {
      const vm = await boot({ config: disks!.b }, 'b');
      await waitForReady(vm, BOOT_BUDGET_MS);
      expect(await servedModels(vm)).toEqual(['appliance-b']);
      seen.b = await startDocument(vm);
      expect(seen.a).toBeDefined();
      expect(seen.b.policy_hash).not.toBe(seen.a!.policy_hash);
      // The manifest Sigil measures at start names the configuration's bytes: another disk, another manifest.
      const b = await measureSelf(join(work, 'config-appliance-b'));
      const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');
      expect(b.configSha256).toBe(sha256(join(work, 'config-appliance-b/sigil.yaml')));
      expect(measured.a?.configSha256).toBe(sha256(join(work, 'config-appliance-a/sigil.yaml')));
      expect(b.manifestSha384).not.toBe(measured.a?.manifestSha384);
      await vm.stop();
    },
    BOOT_BUDGET_MS + 120_000,
  );

  it(
    'stops at boot when one byte of the root is changed in a block that booting does not read',
    async () => {
      const vm = await boot({ config: disks!.a, rootfs: disks!.corrupted }, 'corrupted');
      await expect(waitForReady(vm, BOOT_BUDGET_MS)).rejects.toThrow(/the VM stopped before Sigil was ready/);
      expect(vm.console()).toMatch(/verity.*data block \d+ is corrupted/);
      expect(vm.console()).not.toContain('starting systemd');
      expect(vm.console()).toMatch(/Kernel panic/);
    },
    BOOT_BUDGET_MS + 120_000,
  );
});
