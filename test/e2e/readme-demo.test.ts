import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTree } from '../support/built-tree.ts';
import { fencedBlocks, type FencedBlock } from '../support/fenced-blocks.ts';
import { waitFor } from '../support/wait-for.ts';

/**
 * The README's snippets, run as a reader runs them against `npm start`: a built copy of the tree
 * serves config/sigil.yaml (the built-in engine and its random demo model) on a free port, and every fenced block
 * that is not marked `<!-- not run: why -->` runs there, with two strings rewritten: the README's address
 * http://127.0.0.1:8080 becomes the served one, and the key placeholder sk-sigil-... the key it printed at start.
 * Each block runs on its own, with SIGIL_API_KEY set as the README's `export` leaves it in the reader's shell.
 */
const ROOT = join(import.meta.dirname, '../..');
const README_TEXT = readFileSync(join(ROOT, 'README.md'), 'utf8');
const README = README_TEXT.replace(/\s+/g, ' ');
const README_ADDRESS = 'http://127.0.0.1:8080';
const KEY_PLACEHOLDER = 'sk-sigil-...';

/** The languages of a block a reader would paste into a terminal or a program; any other block must say `text`, `yaml`, ... */
const SHELL = new Set(['sh', 'bash', 'shell', 'zsh', 'console']);
const TYPESCRIPT = new Set(['ts', 'typescript']);
const JAVASCRIPT = new Set(['js', 'javascript', 'mjs']);
const OTHER_RUNNABLE = new Set(['', 'python', 'py']);
const looksRunnable = (block: FencedBlock) =>
  SHELL.has(block.language) || TYPESCRIPT.has(block.language) || JAVASCRIPT.has(block.language) || OTHER_RUNNABLE.has(block.language);

interface Ran {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

interface Expectation {
  /** What the block is, as the README says it. */
  name: string;
  /** A piece of text found in this block's code alone. */
  marker: string;
  check(ran: Ran): void;
}

let server: { child: ChildProcess; exited: Promise<unknown>; url: string; key: string; tree: string; work: string } | undefined;

function run(command: string, args: string[], cwd: string): Promise<Ran> {
  const env = { PATH: process.env.PATH!, HOME: process.env.HOME ?? tmpdir(), SIGIL_API_KEY: server!.key };
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (exitCode) => resolve({ exitCode, stdout, stderr }));
  });
}

/** Runs one block in the built tree as the README has it but for the address and the key. */
async function runBlock(block: FencedBlock): Promise<Ran> {
  const code = block.code.replaceAll(README_ADDRESS, server!.url).replaceAll(KEY_PLACEHOLDER, server!.key);
  if (SHELL.has(block.language)) return run('bash', ['-e', '-o', 'pipefail', '-c', code], server!.tree);
  const extension = TYPESCRIPT.has(block.language) ? 'ts' : 'mjs';
  const file = join(server!.tree, `readme-line-${block.line}.${extension}`);
  writeFileSync(file, code);
  return run(process.execPath, [file], server!.tree);
}

const quoted = (pattern: RegExp): string => {
  const match = pattern.exec(README);
  if (match === null) throw new Error(`README.md no longer says ${pattern}`);
  return match[1]!;
};

const expectations: Expectation[] = [
  {
    name: 'the streamed chat completion ends with data: [DONE], then its receipt as an SSE comment',
    marker: "-H 'X-Service-Receipt: true'",
    check: ({ exitCode, stdout }) => {
      expect(README).toContain('ends with `data: [DONE]`, and then carries the signed message receipt as an SSE comment, `: receipt eyJhbGciOiJFUzI1NiIs...`');
      expect(exitCode).toBe(0);
      const lines = stdout.split('\n').filter((line) => line !== '');
      const done = lines.indexOf('data: [DONE]');
      expect(done).toBeGreaterThan(0);
      expect(lines.slice(0, done).every((line) => line.startsWith('data: {'))).toBe(true);
      expect(lines.slice(done + 1)).toEqual([expect.stringMatching(/^: receipt eyJhbGciOiJFUzI1NiIs[\w-]+\.[\w-]+\.[\w-]+$/)]);
    },
  },
  {
    name: 'sigil verify prints the one line the README quotes',
    marker: 'verify --url http://127.0.0.1:8080 --stream --allow-no-tee',
    check: ({ exitCode, stdout }) => {
      const line = quoted(/It prints one line, `([^`]+?) \.\.\.`/);
      expect(stdout.split('\n')[0]).toMatch(new RegExp(`^${line.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
      expect(stdout.split('\n').filter((l) => l !== '')).toHaveLength(1);
      expect(exitCode).toBe(0);
    },
  },
  {
    name: 'the OpenAI SDK streams the demo model’s random text',
    marker: "process.stdout.write(chunk.choices[0]?.delta?.content ?? '')",
    check: ({ exitCode, stdout, stderr }) => {
      expect(stderr).toBe('');
      expect(exitCode).toBe(0);
      expect(stdout.length).toBeGreaterThan(0);
    },
  },
  {
    name: 'the Anthropic SDK gets a message',
    marker: "from '@anthropic-ai/sdk'",
    check: ({ exitCode, stdout, stderr }) => {
      expect(stderr).toBe('');
      expect(exitCode).toBe(0);
      expect(stdout).toMatch(/^\[\s*\{\s*type: 'text',\s*text: /);
    },
  },
  {
    name: 'tool_choice "required" gives a call of the declared tool, "auto" text',
    marker: "for (const tool_choice of ['required', 'auto'] as const)",
    check: ({ exitCode, stdout, stderr }) => {
      expect(README).toContain('`tool_choice: "required"` or a named function: a valid call of a declared tool');
      expect(README).toContain('the random model almost always answers **text**; send `"required"` to see a call from the demo');
      expect(stderr).toBe('');
      expect(exitCode).toBe(0);
      expect(stdout).toBe(quoted(/It prints `([^`]+)` and `[^`]+`/) + '\n' + quoted(/It prints `[^`]+` and `([^`]+)`/) + '\n');
    },
  },
  {
    name: 'no /v1/responses on the demo: a 400 that says so',
    marker: '/v1/responses',
    check: ({ exitCode, stdout }) => {
      expect(exitCode).toBe(0);
      const [body, status] = stdout.trimEnd().split('\n');
      expect(status).toBe('400');
      const error = (JSON.parse(body!) as { error: { message: string; type: string; code: string } }).error;
      const said = /It prints that error as OpenAI's JSON \(type `([^`]+)`, code `([^`]+)`\), then `400`/.exec(README);
      expect(said).not.toBeNull();
      expect({ type: error.type, code: error.code }).toEqual({ type: said?.[1], code: said?.[2] });
      expect(error.message).toBe(quoted(/not `\/v1\/responses`: Sigil answers it with a 400, "([^"]+)"/));
    },
  },
];

const blocks = fencedBlocks(README_TEXT);
const matching = (expectation: Expectation) => blocks.filter((block) => !block.notRun && block.code.includes(expectation.marker));

describe('reading the fenced blocks of a Markdown file', () => {
  it('gives each block its language, code and line, and the reason of a not-run comment just before it', () => {
    const markdown = [
      'Intro',
      '<!-- not run: installs packages -->',
      '',
      '```sh no-run-looking info',
      'npm install',
      '```',
      '',
      '~~~ts',
      'const a = "```";',
      '~~~',
      '````',
      '```',
      '````',
    ].join('\n');
    expect(fencedBlocks(markdown)).toEqual([
      { language: 'sh', code: 'npm install\n', line: 4, notRun: 'installs packages' },
      { language: 'ts', code: 'const a = "```";\n', line: 8 },
      { language: '', code: '```\n', line: 11 },
    ]);
  });
});

describe('the README’s blocks', () => {
  it('runs every block a reader would run, or says in a <!-- not run: why --> comment why not', () => {
    const unaccounted = blocks
      .filter((block) => !block.notRun && looksRunnable(block))
      .filter((block) => expectations.filter((e) => block.code.includes(e.marker)).length !== 1 || OTHER_RUNNABLE.has(block.language))
      .map((block) => `README.md:${block.line} (${block.language || 'no language'})`);
    expect(unaccounted).toEqual([]);
    expect(expectations.filter((e) => matching(e).length !== 1).map((e) => e.name)).toEqual([]);
  });
});

describe('the README’s snippets against the demo (npm start)', () => {
  beforeAll(async () => {
    const work = mkdtempSync(join(tmpdir(), 'sigil-readme-'));
    const tree = buildTree(work, 'sigil');
    cpSync(join(ROOT, 'config'), join(tree, 'config'), { recursive: true });
    // What `npm start` runs once prestart has built dist/; --port 0 for a free port, as the README's Tests section says.
    const child = spawn(process.execPath, ['bin/sigil.js', 'serve', '--port', '0'], {
      cwd: tree,
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? tmpdir() },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    server = { child, exited, url: '', key: '', tree, work };
    server.url = await waitFor(
      'Sigil is ready',
      () => {
        if (child.exitCode !== null) throw new Error(`sigil exited ${child.exitCode}: ${stderr}`);
        return /Sigil is ready at (http:\/\/127\.0\.0\.1:\d+) - open it for the trust page/.exec(stderr)?.[1];
      },
      { timeoutMs: 300_000 },
    );
    server.key = /^ {4}(sk-sigil-\S+)$/m.exec(stderr)![1]!;
  }, 900_000);

  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    if (server !== undefined) rmSync(server.work, { recursive: true, force: true });
  });

  it.each(expectations.map((e) => [e.name, e] as const))(
    '%s',
    async (_name, expectation) => {
      const [block] = matching(expectation);
      expect(block, `no README block has ${expectation.marker}`).toBeDefined();
      expectation.check(await runBlock(block!));
    },
    180_000,
  );

  describe('json_object without a schema (what the AI SDK’s default generateObject sends) on the demo model', () => {
    it.each([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])(
      'closes a valid JSON object well within the token budget (seed %i)',
      async (seed) => {
        expect(README).toContain('a flat JSON object that closes within about 800 characters, even from random weights');
        const client = new OpenAI({ baseURL: `${server!.url}/v1`, apiKey: server!.key, maxRetries: 0 });
        const answer = await client.chat.completions.create({
          model: 'demo-tiny-random',
          messages: [{ role: 'user', content: 'Describe a cat as JSON.' }],
          response_format: { type: 'json_object' },
          seed,
          max_tokens: 256,
        });
        expect(answer.choices[0]!.finish_reason).toBe('stop');
        const value = JSON.parse(answer.choices[0]!.message.content!) as unknown;
        expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
        expect(answer.usage!.completion_tokens).toBeLessThan(256);
      },
      120_000,
    );
  });
});
