import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CommandSpec } from '../../src/cli/command-line.ts';
import { COMMANDS, main } from '../../src/cli/main.ts';

/** Runs `sigil ARGV` in this process, what it writes captured. */
async function sigil(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((text) => ((stdout += String(text)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((text) => ((stderr += String(text)), true));
  try {
    const code = await main(argv);
    return { code, stdout, stderr };
  } finally {
    vi.restoreAllMocks();
  }
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ');

function withSubcommands(spec: CommandSpec): CommandSpec[] {
  return [spec, ...(spec.subcommands ?? []).flatMap(withSubcommands)];
}

/** Every command and subcommand of `sigil`, as its module declares it. */
const DECLARED = (await Promise.all(Object.values(COMMANDS).map(async (entry) => (await entry.load()).command))).flatMap(withSubcommands);

afterEach(() => vi.restoreAllMocks());

it('declares every command of the top-level table', () => {
  expect(DECLARED.map((spec) => spec.name).filter((name) => !name.includes(' '))).toEqual(Object.keys(COMMANDS));
});

describe.each(DECLARED.map((spec) => [spec.name, spec] as const))('sigil %s', (name, spec) => {
  it('--help prints the usage written from its declaration, to stdout, and exits 0', async () => {
    const help = await sigil([...name.split(' '), '--help']);
    expect(help.stderr).toBe('');
    expect(help.code).toBe(0);
    expect(help.stdout.startsWith(`usage: sigil ${name} [options]`)).toBe(true);
    expect(oneLine(help.stdout)).toContain(oneLine(spec.summary));
    for (const [option, declared] of Object.entries(spec.options)) {
      expect(help.stdout).toContain(`--${option}${declared.type === 'string' ? ` <${declared.value ?? 'VALUE'}>` : ''}`);
      expect(oneLine(help.stdout)).toContain(oneLine(declared.description));
      if (typeof declared.default === 'string') expect(oneLine(help.stdout)).toContain(`default: "${declared.default}"`);
      if (declared.env !== undefined) expect(oneLine(help.stdout)).toContain(`env: ${declared.env})`);
    }
    for (const [operand] of spec.operands ?? []) expect(help.stdout.split('\n')[0]).toContain(operand);
    for (const sub of spec.subcommands ?? []) expect(help.stdout).toMatch(new RegExp(`^ {2}${sub.name.slice(name.length + 1)} `, 'm'));
    expect(help.stdout).toContain('  -h, --help');
  });

  it('-h is --help', async () => {
    expect(await sigil([...name.split(' '), '-h'])).toEqual(await sigil([...name.split(' '), '--help']));
  });

  it.runIf(!name.includes(' '))('sigil help NAME is --help', async () => {
    expect(await sigil(['help', name])).toEqual(await sigil([name, '--help']));
  });

  it('an unknown option exits 2, naming the option and --help, and prints nothing to stdout', async () => {
    const refused = await sigil([...name.split(' '), '--no-such-option']);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    const [problem, usage, more, ...rest] = refused.stderr.split('\n');
    expect(problem).toBe(`${spec.prefix ?? `sigil ${name}`}: unknown option '--no-such-option'`);
    expect(usage!.startsWith(`usage: sigil ${name} [options]`)).toBe(true);
    expect(more).toBe(`(sigil ${name} --help lists every option)`);
    expect(rest).toEqual(['']);
  });

  const needsValue = Object.entries(spec.options).find(([, declared]) => declared.type === 'string');
  it.runIf(needsValue !== undefined)('an option without its value exits 2, naming the option', async () => {
    const [option, declared] = needsValue!;
    const refused = await sigil([...name.split(' '), `--${option}`]);
    expect(refused.code).toBe(2);
    expect(refused.stderr.split('\n')[0]).toBe(`${spec.prefix ?? `sigil ${name}`}: option '--${option} <${declared.value ?? 'VALUE'}>' argument missing`);
  });
});
