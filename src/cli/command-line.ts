import { Command as Program, CommanderError, Option } from 'commander';
import { UsageError } from './cli-errors.ts';

/** One option of a command: what commander parses and what `--help` prints about it. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  /** What it does, for --help. */
  description: string;
  /** The name of its value in --help (FILE, URL, N); a string option only. */
  value?: string;
  short?: string;
  /** Given more than once, every value is kept, in order. */
  multiple?: boolean;
  default?: string | boolean;
  /** The environment variable that stands in for the option when it is absent. */
  env?: string;
}

export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

/** A `sigil` command as commander declares it: `--help` is written from this and nothing else. */
export interface CommandSpec<O extends OptionSpecs = OptionSpecs> {
  /** The words after `sigil`: 'serve', 'measure snp'. */
  name: string;
  /** What it does, first for --help. */
  summary: string;
  /** What its messages start with when not `sigil NAME`: the words scripts already match (`sigil release`). */
  prefix?: string;
  /** Its operands in order, each as commander writes it ('<URL>', '[FILE...]') with what it is. */
  operands?: readonly (readonly [string, string])[];
  options: O;
  /** Subcommands, listed in --help: `sigil NAME SUB --help` is each one's own help. */
  subcommands?: readonly CommandSpec[];
  /** Notes printed after the options: exit statuses, environment, what to read next. */
  notes?: string;
}

type Value<S extends OptionSpec> = S['type'] extends 'boolean'
  ? S extends { default: boolean }
    ? boolean
    : boolean | undefined
  : S extends { multiple: true }
    ? string[] | undefined
    : S extends { default: string }
      ? string
      : string | undefined;

/** The parsed command line, shaped as `node:util parseArgs` shapes it: values by long option name, then the operands. */
export interface CommandLine<O extends OptionSpecs> {
  values: { -readonly [K in keyof O]: Value<O[K]> };
  positionals: string[];
  /** Where an option's value came from, for messages: its flag ('--port'), its variable ('SIGIL_PORT') or undefined (its default or absent). */
  sourceOf(name: keyof O & string): string | undefined;
}

interface Output {
  write(text: string): unknown;
}

export interface CommandIo {
  stdout: Output;
  stderr: Output;
}

const PROCESS_IO: CommandIo = { stdout: process.stdout, stderr: process.stderr };

/** The exit status of a command line that cannot run, for every command: `sigil X --help` then says how to call it. */
export const USAGE_EXIT = 2;

function flagsOf(name: string, spec: OptionSpec): string {
  const long = `--${name}${spec.type === 'string' ? ` <${spec.value ?? 'VALUE'}>` : ''}`;
  return spec.short === undefined ? long : `-${spec.short}, ${long}`;
}

/** Text commander wraps to the terminal: the line breaks of the source are not the reader's. */
function paragraph(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ');
}

/** A subcommand's line in its parent's list. */
function firstSentence(text: string): string {
  return paragraph(text)
    .replace(/([.:]) .*$/, '$1')
    .replace(/[.:]$/, '');
}

/** The commander program for `spec`: its options, operands and subcommands, with Sigil's help and error output. */
export function declareCommand(spec: CommandSpec, io: CommandIo = PROCESS_IO): Program {
  const program = new Program(`sigil ${spec.name}`).description(paragraph(spec.summary));
  for (const [operand, description] of spec.operands ?? []) program.argument(operand, description);
  for (const [name, option] of Object.entries(spec.options)) {
    const declared = new Option(flagsOf(name, option), option.multiple === true ? `${option.description} (may be given more than once)` : option.description);
    if (option.multiple === true) declared.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]);
    if (option.type === 'string' && typeof option.default === 'string') declared.default(option.default);
    if (option.env !== undefined) declared.env(option.env);
    program.addOption(declared);
  }
  for (const sub of spec.subcommands ?? []) program.command(sub.name.slice(spec.name.length + 1)).description(firstSentence(sub.summary));
  if (spec.subcommands !== undefined) program.helpCommand(false);
  program.helpOption('-h, --help', 'print this help');
  program.configureHelp({ styleTitle: (title) => title.toLowerCase(), sortOptions: false });
  if (spec.notes !== undefined) program.addHelpText('after', `\n${spec.notes.trimEnd()}`);
  program.exitOverride();
  program.configureOutput({
    writeOut: (text) => io.stdout.write(text),
    writeErr: (text) => io.stderr.write(text),
    outputError: () => undefined,
  });
  return program;
}

/** The usage line of `spec`, as commander writes it at the head of --help. */
export function usageLine(spec: CommandSpec): string {
  return `usage: sigil ${spec.name} ${declareCommand(spec).usage()}`;
}

/** Prints a command line's problem the one way every command does (what, the usage, where the rest is) and returns 2. */
export function refuseUsage(spec: CommandSpec, message: string, io: CommandIo = PROCESS_IO): number {
  io.stderr.write(`${spec.prefix ?? `sigil ${spec.name}`}: ${message}\n${usageLine(spec)}\n(sigil ${spec.name} --help lists every option)\n`);
  return USAGE_EXIT;
}

/** commander's message without its "error: " prefix: what was wrong, in its words ("unknown option '--x'"). */
function problemOf(error: CommanderError): string {
  return error.message.replace(/^error: /, '').replace(/\n/g, ' ');
}

/**
 * `argv` parsed by commander against `spec`: the values and operands, or the exit status once commander has answered
 * (0 after --help, printed to stdout; 2 after a line it refuses: an unknown option, a missing value, too many operands).
 */
export function parseCommandLine<O extends OptionSpecs>(spec: CommandSpec<O>, argv: readonly string[], io: CommandIo = PROCESS_IO): CommandLine<O> | number {
  const program = declareCommand(spec, io);
  let positionals: string[] = [];
  program.action((...args: unknown[]) => {
    positionals = args.slice(0, -2).flatMap((a) => (a === undefined ? [] : Array.isArray(a) ? (a as string[]) : [a as string]));
  });
  try {
    program.parse([...argv], { from: 'user' });
  } catch (error) {
    if (!(error instanceof CommanderError)) throw error;
    if (error.exitCode === 0) return 0;
    return refuseUsage(spec, problemOf(error), io);
  }
  const opts = program.opts();
  const values: Record<string, unknown> = {};
  const sources: Record<string, string | undefined> = {};
  for (const option of program.options) {
    const name = option.long!.slice(2);
    const attribute = option.attributeName();
    const declared = spec.options[name];
    if (declared === undefined) continue;
    // As parseArgs: an option neither given nor defaulted has no key at all.
    const value: unknown = opts[attribute] ?? (declared.type === 'boolean' ? declared.default : undefined);
    if (value !== undefined) values[name] = value;
    const source = program.getOptionValueSource(attribute);
    sources[name] = source === 'cli' ? `--${name}` : source === 'env' ? declared.env : undefined;
  }
  return { values: values as CommandLine<O>['values'], positionals, sourceOf: (name) => sources[name] };
}

/**
 * For a command made of subcommands: the one `argv` names and the arguments left for it, or the exit status once
 * answered: 0 after --help, 2 (the help on stderr) with no subcommand, 2 with an unknown one or an option before it.
 */
export function chooseSubcommand(spec: CommandSpec, argv: readonly string[], io: CommandIo = PROCESS_IO): { sub: CommandSpec; argv: string[] } | number {
  const sub = spec.subcommands?.find((s) => s.name === `${spec.name} ${argv[0]}`);
  if (sub !== undefined) return { sub, argv: argv.slice(1) };
  if (argv[0] !== undefined && !argv[0].startsWith('-')) {
    const names = (spec.subcommands ?? []).map((s) => s.name.slice(spec.name.length + 1));
    return refuseUsage(spec, `unknown subcommand ${JSON.stringify(argv[0])}: give one of ${names.join(', ')}`, io);
  }
  const program = declareCommand(spec, io);
  if (argv.length === 0) {
    io.stderr.write(program.helpInformation());
    return USAGE_EXIT;
  }
  try {
    program.parse([...argv], { from: 'user' });
  } catch (error) {
    if (!(error instanceof CommanderError)) throw error;
    if (error.exitCode === 0) return 0;
    return refuseUsage(spec, problemOf(error), io);
  }
  return refuseUsage(spec, 'give a subcommand', io);
}

/** A UsageError thrown by a command's own checks, printed as commander's are; anything else is the caller's. */
export function usageExit(spec: CommandSpec, error: unknown, io: CommandIo = PROCESS_IO): number | undefined {
  return error instanceof UsageError ? refuseUsage(spec, error.message, io) : undefined;
}
