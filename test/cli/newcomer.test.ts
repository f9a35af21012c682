import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';
import { startTestEngine } from '../support/test-engine.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const MODELS =
  'models: [{id: m, name: M, provider: p, created: 0, context_window: 8, reasoning: false, regions: [x], pricing: {input_per_mtok: 0, output_per_mtok: 0, currency: USD}, model_hash: "sha256:' +
  '0'.repeat(64) +
  '"}]\n';

function sigil(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [...SIGIL_FROM_SOURCES, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 20_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function configDir(yaml: string, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-newcomer-'));
  writeFileSync(join(dir, 'sigil.yaml'), yaml);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

describe('the sigil command explains itself', () => {
  it('--version, -v and -V print the package version', () => {
    for (const flag of ['--version', '-v', '-V']) expect(sigil([flag])).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
  });

  it('--help lists every command, config check included', () => {
    const help = sigil(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: sigil <command> \[options\]\n/);
    for (const name of ['serve', 'keys', 'config', 'engine', 'hash-model', 'verify', 'verify-evidence'])
      expect(help.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
  });

  it('a mistyped command is refused with the closest one suggested', () => {
    const result = sigil(['kes']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe("error: unknown command 'kes'\n(Did you mean keys?)\n");
  });

  it('sigil keys, sigil keys --help and sigil help keys print the same usage', () => {
    const bare = sigil(['keys']);
    const help = sigil(['keys', '--help']);
    expect(bare.code).toBe(2);
    expect(help.code).toBe(0);
    expect(bare.stderr).toBe(help.stdout);
    expect(sigil(['help', 'keys']).stdout).toBe(help.stdout);
    expect(help.stdout).toMatch(/^ {2}revoke +Removes a key /m);
  });

  it('engine --help describes the options of make-model and bench', () => {
    const help = sigil(['engine', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^ {2}make-model +writes a tiny llama GGUF/m);
    expect(help.stdout).toMatch(/^ {2}bench +measures the engine/m);
    const makeModel = sigil(['engine', 'make-model', '--help']);
    expect(makeModel.code).toBe(0);
    expect(makeModel.stdout.replace(/\s+/g, ' ')).toContain(' --seed <N> seed of the random weights (default 42: the same model every time) ');
    const bench = sigil(['engine', 'bench', '--help']);
    expect(bench.code).toBe(0);
    expect(bench.stdout).toMatch(/^ {2}--max-tokens <N> +tokens generated per request \(default: "256"\)$/m);
  });

  it('keys list starts with a header naming the columns', () => {
    const dir = configDir('auth: {keys_file: keys.txt}\n');
    sigil(['keys', 'add', '--config', join(dir, 'sigil.yaml'), '--label', 'ci']);
    const lines = sigil(['keys', 'list', '--config', join(dir, 'sigil.yaml')]).stdout.split('\n');
    expect(lines[0]).toBe('ID            CREATED                   LABEL');
    expect(lines[1]).toMatch(/^[0-9a-f]{12} {2}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z {2}ci$/);
    expect(lines).toHaveLength(3);
  });
});

describe('config errors a newcomer meets first', () => {
  it('a config without auth says what to write', () => {
    const dir = configDir('listen: {port: 0}\n');
    const result = sigil(['serve', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `sigil: ${join(dir, 'sigil.yaml')}: auth: missing: this setting is required, e.g. \`auth: {keys_file: api-keys}\` (the file \`sigil keys add\` writes; see config/sigil.example.yaml and docs/configuration.md)\n`,
    );
  });

  it('an upstream without its url says what to write', () => {
    const dir = configDir('auth: {keys_file: keys.txt}\nupstreams: {vllm: {timeout_ms: 1000}}\n');
    const result = sigil(['config', 'check', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `sigil config check: ${join(dir, 'sigil.yaml')}: upstreams.vllm.url: missing: this setting is required, e.g. \`url: http://127.0.0.1:8000/v1\` (the engine's OpenAI base URL)\n`,
    );
  });

  it('a missing config file points to --config, SIGIL_CONFIG and the example', () => {
    const result = sigil(['serve', '--config', '/nonexistent/sigil.yaml']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      'sigil: no config file at /nonexistent/sigil.yaml. Name one with --config FILE or SIGIL_CONFIG=FILE (default config/sigil.yaml); config/sigil.example.yaml is a commented example to copy, and docs/configuration.md lists every setting.\n',
    );
  });
});

describe('sigil config check', () => {
  it('suggests the key meant for a mistyped one, at any depth', () => {
    const dir = configDir('atestation: {provider: none}\nauth: {keys_fle: keys}\nlisten: {prot: 8080}\n');
    const result = sigil(['config', 'check', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`unknown key 'atestation' (did you mean 'attestation'?)`);
    expect(result.stderr).toContain(`unknown key 'auth.keys_fle' (did you mean 'keys_file'?)`);
    expect(result.stderr).toContain(`unknown key 'listen.prot' (did you mean 'port'?)`);
  });

  it('suggests nothing for a key far from every known one', () => {
    const dir = configDir('auth: {keys_file: keys}\nzebra: 1\n');
    const result = sigil(['config', 'check', '--config', join(dir, 'sigil.yaml')]);
    expect(result.stderr).toContain(`unknown key 'zebra'\n`);
  });

  it('summarises a good config and what it names, without serving', () => {
    const dir = configDir('listen: {port: 9}\nauth: {keys_file: keys.txt}\nupstreams: {e: {url: "http://127.0.0.1:9/v1"}}\ncatalogue: models.yaml\n', {
      'models.yaml': MODELS,
    });
    const result = sigil(['config', 'check', '--config', join(dir, 'sigil.yaml')]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(
      `config OK: ${join(dir, 'sigil.yaml')}\n` +
        '  listen: 127.0.0.1:9, tls off, attestation none\n' +
        '  upstream e: http://127.0.0.1:9/v1\n' +
        `  catalogue: 1 model(s) in ${join(dir, 'models.yaml')}: m\n` +
        '  warning: model m: model_hash is the all-zero placeholder, so receipts would name no real weights: put what `sigil hash-model PATH` prints for them\n' +
        `  keys: 0 in ${join(dir, 'keys.txt')} (every request will be refused; add one with \`sigil keys add\`)\n`,
    );
    expect(existsSync(join(dir, 'keys.txt'))).toBe(false);
  });

  it('names every problem and exits 1: a catalogue naming an unknown upstream, an unset engine key', () => {
    const models = MODELS.replace('model_hash:', 'upstream: nope, model_hash:');
    const dir = configDir(
      'auth: {keys_file: keys.txt}\nupstreams: {e: {url: "http://127.0.0.1:9/v1", api_key_env: SIGIL_TEST_UNSET_ENGINE_KEY}}\ncatalogue: models.yaml\n',
      { 'models.yaml': models },
    );
    const result = sigil(['config', 'check', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('sigil config check: upstreams.e.api_key_env: environment variable SIGIL_TEST_UNSET_ENGINE_KEY is not set\n');
    expect(result.stderr).toContain("'nope'");
  });
});

describe('sigil serve on a port already in use', () => {
  let taken: Server;
  afterAll(() => taken?.close());

  it('stops at once, naming the port and the setting, before making a key or starting an engine', async () => {
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    const dir = configDir(`listen: {host: 127.0.0.1, port: ${port}}\nauth: {keys_file: keys.txt}\n`);
    const result = sigil(['serve', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `sigil: port ${port} on 127.0.0.1 (from listen.host, listen.port in ${join(dir, 'sigil.yaml')}) is already in use, perhaps by another Sigil. ` +
        'Stop that process, or start on another port: sigil serve --port N (0: any free port).\n',
    );
    expect(existsSync(join(dir, 'keys.txt'))).toBe(false);
  });
});

describe('sigil serve on a first start', () => {
  it('a start that fails (a missing catalogue) shows no new key and leaves no keys file', () => {
    const dir = configDir(
      'listen: {host: 127.0.0.1, port: 0}\nauth: {keys_file: keys.txt}\nupstreams: {e: {url: "http://127.0.0.1:9/v1"}}\ncatalogue: nope.yaml\n',
    );
    const result = sigil(['serve', '--config', join(dir, 'sigil.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).not.toContain('No API keys yet');
    expect(result.stderr).toContain('nope.yaml');
    expect(existsSync(join(dir, 'keys.txt'))).toBe(false);
  });

  it('a start that works shows the new key, then one plain line with the URL', async () => {
    const engine = await startTestEngine({ modelNames: ['m'] });
    onTestFinished(() => engine.close());
    const dir = configDir(
      `listen: {host: 127.0.0.1, port: 0}\nauth: {keys_file: keys.txt}\nupstreams: {e: {url: "${engine.baseUrl}"}}\ncatalogue: models.yaml\n`,
      { 'models.yaml': MODELS },
    );
    const child = spawn(process.execPath, [...SIGIL_FROM_SOURCES, 'serve', '--config', join(dir, 'sigil.yaml')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    await new Promise<string>((resolve, reject) => {
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const match = /Sigil is ready at (http:\/\/127\.0\.0\.1:\d+) - open it for the trust page\n/.exec(stderr);
        if (match) resolve(match[1]!);
      });
      child.once('exit', (code) => reject(new Error(`sigil exited ${code}: ${stderr}`)));
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    expect(stderr.indexOf('No API keys yet')).toBeGreaterThanOrEqual(0);
    expect(stderr.indexOf('No API keys yet')).toBeLessThan(stderr.indexOf('Sigil is ready at'));
    expect(existsSync(join(dir, 'keys.txt'))).toBe(true);
  }, 60_000);
});

describe('sigil serve with no upstream, in a fresh folder', () => {
  it('says what it is doing while it makes the demo model and starts the engine, then that it is ready', async () => {
    const dir = configDir('listen: {host: 127.0.0.1, port: 0}\nauth: {keys_file: keys.txt}\n');
    const child = spawn(process.execPath, [...SIGIL_FROM_SOURCES, 'serve', '--config', join(dir, 'sigil.yaml')], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (stderr.includes('Sigil is ready at ')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`sigil exited ${code}: ${stderr}`)));
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    // Not a terminal: JSON lines, in the order a person waits through them.
    const messages = stdout
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { msg: string }).msg);
    const at = (msg: string) => messages.indexOf(msg);
    expect(at('making the demo model (5.6 MB of random weights, once)')).toBeGreaterThanOrEqual(0);
    expect(at('making the demo model (5.6 MB of random weights, once)')).toBeLessThan(at('starting the built-in engine'));
    expect(at('starting the built-in engine')).toBeLessThan(at('built-in engine started'));
    expect(at('built-in engine started')).toBeLessThan(at('sigil listening'));
    expect(existsSync(join(dir, '.sigil/models/demo-tiny-random.gguf'))).toBe(true);
  }, 120_000);
});
