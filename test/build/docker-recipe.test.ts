import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { engineAndSigil } from '../support/engine-and-sigil.ts';

/**
 * The README's `docker run` recipe for a confidential VM, read against the Dockerfile and the config it
 * serves (this machine has no Docker engine): every file the config names is in the image or mounted,
 * what configfs-tsm needs is given, and the image's HEALTHCHECK asks the port and scheme the config serves.
 */
const ROOT = join(import.meta.dirname, '../..');
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');

/** The recipe's shell block and its `docker run -d` command, as words (line continuations joined, quotes and $PWD kept). */
function recipe(): { block: string; words: string[] } {
  const block = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.includes('docker run -d'));
  if (block === undefined) throw new Error('README.md has no docker run -d recipe');
  const command = block
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .find((line) => line.startsWith('docker run -d'))!;
  return { block, words: command.split(/\s+/).filter((w) => w !== '') };
}

const flagValues = (words: string[], flag: string) => words.flatMap((w, i) => (w === flag ? [words[i + 1]!.replace(/"/g, '')] : []));
const runtimeStage = () => dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
const WORKDIR = () => /^WORKDIR (\S+)$/m.exec(runtimeStage())![1]!;

describe("the README's docker run recipe", () => {
  const { block, words } = recipe();
  const image = /docker build -t (\S+) \./.exec(block)![1]!;
  const imageAt = words.lastIndexOf(image);
  const args = words.slice(imageAt + 1);
  const mounts = flagValues(words, '-v').map((v) => v.split(':')[1]!);
  const configPath = args[args.indexOf('--config') + 1]!;
  const inContainer = (path: string) => (posix.isAbsolute(path) ? path : posix.join(WORKDIR(), path));
  const config = parse(readFileSync(join(ROOT, posix.relative(WORKDIR(), inContainer(configPath))), 'utf8')) as {
    listen: { port: number };
    tls?: { mode: string };
    auth: { keys_file: string };
    catalogue: string;
    attestation: { provider: string; tsm_path?: string };
    upstreams: Record<string, { url: string }>;
  };
  const fromConfig = (path: string) => posix.normalize(posix.join(posix.dirname(inContainer(configPath)), path));
  const mounted = (path: string) => mounts.some((target) => path === target || path.startsWith(`${target}/`));

  it('runs the image built from this Dockerfile with a command its entrypoint takes, on a config the image holds', () => {
    expect(imageAt).toBeGreaterThan(0);
    expect(dockerfile).toContain('ENTRYPOINT ["node", "--disable-sigusr1", "bin/sigil.js"]');
    expect(args[0]).toBe('serve');
    expect(runtimeStage()).toMatch(/^COPY config \.\/config$/m);
    expect(configPath.startsWith('config/')).toBe(true);
  });

  it('mounts the keys file and the catalogue the config names, and makes the key into that mount first', () => {
    const keys = fromConfig(config.auth.keys_file);
    expect(mounted(keys), keys).toBe(true);
    expect(mounted(fromConfig(config.catalogue))).toBe(true);
    const keysAdd = block.split('\n').find((line) => line.includes(' keys add '))!;
    expect(keysAdd).toContain(`--config ${configPath}`);
    expect(flagValues(keysAdd.split(/\s+/), '-v').map((v) => v.split(':')[1])).toContain(posix.dirname(keys));
  });

  it('gives what attestation needs in a confidential VM: root for configfs-tsm (the image runs as another user), its mount, the guest device', () => {
    expect(['auto', 'tdx', 'sev-snp']).toContain(config.attestation.provider);
    expect(runtimeStage()).toMatch(/^USER sigil$/m);
    expect(flagValues(words, '--user')).toEqual(['0']);
    // Root may write any file: on a TEE Sigil refuses to start while its code is writable, so the container's root is read-only.
    expect(words).toContain('--read-only');
    expect(mounted(config.attestation.tsm_path ?? '/sys/kernel/config/tsm/report')).toBe(true);
    expect(flagValues(words, '--device')).toEqual(['/dev/tdx_guest']);
    expect(readme).toContain('use `--device /dev/sev-guest` instead of `/dev/tdx_guest`');
  });

  it('reaches a loopback engine with host networking, and the HEALTHCHECK asks the scheme and port the config serves', () => {
    if (Object.values(config.upstreams).some((u) => /\/\/(127\.|localhost)/.test(u.url))) expect(flagValues(words, '--network')).toEqual(['host']);
    const scheme = config.tls?.mode === undefined || config.tls.mode === 'off' ? 'http' : 'https';
    expect(dockerfile).toContain(`ENV SIGIL_HEALTH_URL=${scheme}://127.0.0.1:${config.listen.port}/healthz`);
    expect(dockerfile).toContain(`EXPOSE ${config.listen.port}`);
    expect(dockerfile).toMatch(/^HEALTHCHECK /m);
  });
});

describe("the image's HEALTHCHECK command", () => {
  const both = engineAndSigil({ modelNames: ['m'], models: [{ id: 'm' }] });
  const command = JSON.parse(/^ {2}CMD (\[.*\])$/m.exec(dockerfile)![1]!) as string[];
  // Sigil runs in this process: the check runs beside it, not blocking it.
  const run = (url: string) =>
    new Promise<number | null>((resolve) => {
      const child = spawn(command[0] === 'node' ? process.execPath : command[0]!, command.slice(1), {
        env: { ...process.env, SIGIL_HEALTH_URL: url },
        stdio: 'ignore',
      });
      child.once('exit', resolve);
    });

  it('exits 0 when Sigil answers /healthz, and 1 when nothing listens', async () => {
    expect(await run(`${both.sigil.url}/healthz`)).toBe(0);
    expect(await run('http://127.0.0.1:9/healthz')).toBe(1);
  });
});
