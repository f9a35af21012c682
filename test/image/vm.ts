import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { killChild } from '../support/kill-child.ts';
import { freePort } from '../support/free-port.ts';
import { waitFor } from '../support/wait-for.ts';

/** The disks of one boot: the measured image's (from image/build.sh OUT), a root file system to use instead, a configuration disk. */
export interface BootDisks {
  out: string;
  rootfs?: string;
  config?: string;
}

export interface Vm {
  /** When QEMU was started (ms since the epoch). */
  startedAt: number;
  /** Sigil's port 8080 in the VM, forwarded to this loopback URL by QEMU's user-mode network. */
  url: string;
  proc: ChildProcess;
  /** Resolves with QEMU's exit code when the VM stops (a panic with -no-reboot, a power-off, or being killed). */
  exited: Promise<number | null>;
  /** Everything the VM printed on its serial console so far. */
  console(): string;
  stop(): Promise<void>;
}

/**
 * Boots the image under QEMU as a VM host would by measured direct boot: kernel, initrd and the measured command line
 * as built (never changed for the test), the root and its hash tree as the first two virtio disks, the model disk
 * third, the configuration disk fourth. On these machines QEMU runs under TCG (no /dev/kvm): Debian's QEMU 7.2 then
 * mis-emulates cmpxchg16b, which Linux 6.12 uses while probing virtio, so the test VMM's CPU model has cx16 off
 * (SIGIL_IMAGE_KVM=1 uses KVM and the host's CPU instead).
 * -no-reboot turns a kernel panic (dm-verity corruption, panic=-1) into QEMU exiting.
 */
export async function bootVm(disks: BootDisks, serialLog: string): Promise<Vm> {
  const port = await freePort();
  // KVM only when asked: a /dev/kvm that opens may still refuse the guest's MSRs (nested virtualization on a cloud VM).
  const kvm = process.env.SIGIL_IMAGE_KVM === '1';
  const drive = (file: string) => ['-drive', `file=${file},if=virtio,format=raw,readonly=on`];
  const args = [
    ...(kvm ? ['-enable-kvm', '-cpu', 'host'] : ['-accel', 'tcg', '-cpu', 'max,cx16=off']),
    '-machine',
    'q35',
    '-m',
    '2048',
    '-smp',
    '2',
    '-nographic',
    '-no-reboot',
    '-serial',
    `file:${serialLog}`,
    '-monitor',
    'none',
    '-kernel',
    join(disks.out, 'vmlinuz'),
    '-initrd',
    join(disks.out, 'initrd.img'),
    '-append',
    readFileSync(join(disks.out, 'cmdline'), 'utf8').trim(),
    ...drive(disks.rootfs ?? join(disks.out, 'rootfs.squashfs')),
    ...drive(join(disks.out, 'rootfs.verity')),
    ...drive(join(disks.out, 'model.img')),
    ...(disks.config === undefined ? [] : drive(disks.config)),
    '-netdev',
    `user,id=net0,hostfwd=tcp:127.0.0.1:${port}-:8080`,
    '-device',
    'virtio-net-pci,netdev=net0',
  ];
  const startedAt = Date.now();
  const proc = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const readConsole = () => {
    try {
      return readFileSync(serialLog, 'utf8') + stderr;
    } catch {
      return stderr;
    }
  };
  return { startedAt, url: `http://127.0.0.1:${port}`, proc, exited, console: readConsole, stop: () => killChild(proc) };
}

/** How long a boot took, from QEMU's start: to systemd's login prompt on the serial console, and to Sigil's /readyz. */
export interface BootTimes {
  loginMs: number | undefined;
  readyMs: number;
}

/**
 * Polls GET /readyz (and the serial console for systemd's login prompt) until Sigil in the VM answers 200. Fails as
 * soon as the VM stops, or after `budgetMs` (a boot under TCG takes minutes on a shared machine), with the console's tail.
 */
export async function waitForReady(vm: Vm, budgetMs: number): Promise<BootTimes> {
  let stopped = false;
  let loginMs: number | undefined;
  void vm.exited.then(() => (stopped = true));
  const outcome = await waitFor(
    'Sigil in the VM ready',
    async () => {
      if (stopped) return 'stopped';
      if (loginMs === undefined && vm.console().includes('sigil login:')) loginMs = Date.now() - vm.startedAt;
      const ready = await fetch(`${vm.url}/readyz`, { signal: AbortSignal.timeout(5000) }).then(
        (r) => r.status === 200,
        () => false,
      );
      return ready && 'ready';
    },
    { timeoutMs: budgetMs, intervalMs: 1000 },
  ).catch(() => {
    throw new Error(`Sigil in the VM was not ready after ${budgetMs} ms:\n${tail(vm.console())}`);
  });
  if (outcome === 'stopped') throw new Error(`the VM stopped before Sigil was ready:\n${tail(vm.console())}`);
  return { loginMs, readyMs: Date.now() - vm.startedAt };
}

/** What the image's initrd prints first (image/initrd-init.sh), and before it fails for any reason of the image's. */
const INITRD_SPEAKS = 'sigil-initrd: ';

/**
 * Boots with `start` until the guest's initrd runs. A guest that stops before its initrd printed a line crashed in the
 * emulator (TCG on a loaded machine: an Oops in the kernel's own timers), which says nothing of the image, so it is
 * booted again, at most `attempts` times in all; a fault of the image shows only after the initrd has spoken.
 */
export async function bootPastInitrd(start: () => Promise<Vm>, budgetMs: number, attempts = 3): Promise<Vm> {
  for (let attempt = 1; ; attempt++) {
    const vm = await start();
    let stopped = false;
    void vm.exited.then(() => (stopped = true));
    const reached = await waitFor('the initrd to run', () => (vm.console().includes(INITRD_SPEAKS) ? 'initrd' : stopped && 'stopped'), {
      timeoutMs: budgetMs,
      intervalMs: 1000,
    });
    if (reached === 'initrd') return vm;
    const crash = `the guest stopped before its initrd ran (an emulator crash, not an image fault):\n${tail(vm.console())}`;
    if (attempt >= attempts) throw new Error(`${attempts} boots in a row: ${crash}`);
    process.stdout.write(`boot ${attempt} of ${attempts}: ${crash}\nbooting again\n`);
  }
}

export function tail(text: string, lines = 40): string {
  return text.split('\n').slice(-lines).join('\n');
}
