import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';

function sigil(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [...SIGIL_FROM_SOURCES, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 20_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function configDir(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-cli-'));
  writeFileSync(join(dir, 'sigil.yaml'), yaml);
  return dir;
}

describe('sigil serve refuses a bad configuration at start, naming the key', () => {
  it.each([
    ['an unknown key', 'auth: {keys_file: k}\nlisten: {port: 0, hots: x}\n', "unknown key 'listen.hots'"],
    ['a bad value', 'auth: {keys_file: k}\nlisten: {port: 70000}\n', 'listen.port: Too big'],
    ['a missing required key', 'listen: {port: 0}\n', 'auth: missing: this setting is required'],
    ['a bad upstream url', 'auth: {keys_file: k}\nupstreams: {a: {url: "ftp://x"}}\n', 'upstreams.a.url: Invalid URL'],
    ['an unknown attestation provider', 'auth: {keys_file: k}\nattestation: {provider: sgx}\n', 'attestation.provider: Invalid option'],
    [
      'a hop-by-hop header to forward',
      'auth: {keys_file: k}\nupstreams: {a: {url: "http://127.0.0.1:1/v1", forward_headers: [Keep-Alive]}}\n',
      'upstreams.a.forward_headers.0: hop-by-hop',
    ],
  ])('%s', (_name, yaml, message) => {
    const dir = configDir(yaml);
    const result = sigil(['serve', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(message);
  });

  it('fails at start when a configured hardware provider is absent', () => {
    const dir = configDir(
      'auth: {keys_file: k}\nupstreams: {e: {url: "http://127.0.0.1:9/v1"}}\ncatalogue: models.yaml\nattestation: {provider: sev-snp, tsm_path: /nonexistent/tsm}\n',
    );
    writeFileSync(
      join(dir, 'models.yaml'),
      'models: [{id: m, name: M, provider: p, created: 0, context_window: 8, reasoning: false, regions: [x], pricing: {input_per_mtok: 0, output_per_mtok: 0, currency: USD}, model_hash: "sha256:' +
        '0'.repeat(64) +
        '"}]\n',
    );
    const result = sigil(['serve', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('/nonexistent/tsm');
    expect(result.stderr).toContain('sev-snp');
  });

  it('refuses attestation.gpu required when no GPU can be attested, naming the setting', () => {
    const dir = configDir(
      'auth: {keys_file: k}\nupstreams: {e: {url: "http://127.0.0.1:9/v1"}}\ncatalogue: models.yaml\nattestation: {provider: none, gpu: required, nvml_library: /nonexistent/libnvidia-ml.so.1}\n',
    );
    writeFileSync(
      join(dir, 'models.yaml'),
      'models: [{id: m, name: M, provider: p, created: 0, context_window: 8, reasoning: false, regions: [x], pricing: {input_per_mtok: 0, output_per_mtok: 0, currency: USD}, model_hash: "sha256:' +
        '0'.repeat(64) +
        '"}]\n',
    );
    const result = sigil(['serve', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('attestation.gpu is required but NVML (/nonexistent/libnvidia-ml.so.1) cannot be loaded');
  });

  it('refuses provider auto without a TEE on an address the network reaches, unless none is explicit', () => {
    const models =
      'models: [{id: m, name: M, provider: p, created: 0, context_window: 8, reasoning: false, regions: [x], pricing: {input_per_mtok: 0, output_per_mtok: 0, currency: USD}, model_hash: "sha256:' +
      '0'.repeat(64) +
      '"}]\n';
    const dir = configDir(
      'listen: {host: 0.0.0.0, port: 0}\nauth: {keys_file: k}\nupstreams: {e: {url: "http://127.0.0.1:9/v1"}}\ncatalogue: models.yaml\nattestation: {provider: auto, tsm_path: /nonexistent/tsm}\n',
    );
    writeFileSync(join(dir, 'models.yaml'), models);
    const result = sigil(['serve', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('listen.host 0.0.0.0 is reachable from the network');
    expect(result.stderr).toContain('attestation.provider: none');
  });

  it.each(['serve', 'keys', 'engine', 'hash-model', 'verify'])('sigil %s --help prints its usage and exits 0', (command) => {
    const result = sigil([command, '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^usage:/);
  });

  it('reads the config path from SIGIL_CONFIG', () => {
    const dir = configDir('auth: {keys_file: k}\nbogus: 1\n');
    const result = sigil(['serve'], { SIGIL_CONFIG: join(dir, 'sigil.yaml') });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("unknown key 'bogus'");
  });

  it('says which config file it cannot read', () => {
    const result = sigil(['serve', '--config', '/nonexistent/sigil.yaml']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no config file at /nonexistent/sigil.yaml.');
  });
});

describe('sigil keys', () => {
  it('add prints a new key once and stores only its SHA-256; revoke removes it', () => {
    const dir = configDir('auth: {keys_file: keys.txt}\n');
    const config = join(dir, 'sigil.yaml');
    const added = sigil(['keys', 'add', '--config', config, '--label', 'ci']);
    expect(added.code).toBe(0);
    const key = added.stdout.trim();
    expect(key).toMatch(/^sk-sigil-[A-Za-z0-9_-]{43}$/);
    const hash = createHash('sha256').update(key).digest('hex');
    const file = readFileSync(join(dir, 'keys.txt'), 'utf8');
    expect(file).toContain(`sha256:${hash} `);
    expect(file).not.toContain(key);
    expect(added.stderr).toContain(`Added key ${hash.slice(0, 12)}`);

    const second = sigil(['keys', 'add', '--config', config]).stdout.trim();
    expect(sigil(['keys', 'list', '--config', config]).stdout.split('\n').filter(Boolean)).toHaveLength(3);

    const revoked = sigil(['keys', 'revoke', hash.slice(0, 8), '--config', config]);
    expect(revoked.code).toBe(0);
    const after = readFileSync(join(dir, 'keys.txt'), 'utf8');
    expect(after).not.toContain(hash);
    expect(after).toContain(createHash('sha256').update(second).digest('hex'));
  });

  it('refuses to revoke an unknown or ambiguous id', () => {
    const dir = configDir('auth: {keys_file: keys.txt}\n');
    const config = join(dir, 'sigil.yaml');
    sigil(['keys', 'add', '--config', config]);
    const result = sigil(['keys', 'revoke', 'ffffffffff', '--config', config]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no key with id ffffffffff');
  });
});
