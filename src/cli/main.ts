// First: from here on SIGUSR1 cannot open the inspector (see the module).
import './ignore-sigusr1.ts';
import { readFileSync } from 'node:fs';
import { Command as Program, CommanderError } from 'commander';
import { ENGINE_USAGE } from './engine-usage.ts';
import { SERVE_USAGE } from './serve-usage.ts';

/** The `sigil` command: each subcommand lives in its own module and is loaded only when used. */
export type Command = (argv: string[]) => Promise<number>;

interface CommandEntry {
  summary: string;
  /** The command's own --help text; absent when the command prints its own. */
  help?: string;
  load: () => Promise<{ run: Command }>;
}

const COMMANDS: Record<string, CommandEntry> = {
  serve: {
    summary: 'run the proxy (sigil serve [--config FILE] [--host HOST] [--port PORT])',
    help: SERVE_USAGE,
    load: () => import('./serve.ts'),
  },
  keys: {
    summary: 'manage API keys (sigil keys add|list|revoke ID)',
    load: () => import('./keys.ts'),
  },
  config: {
    summary: 'check a config, its catalogue and keys file without serving (sigil config check [--config FILE])',
    load: () => import('./config-check.ts'),
  },
  engine: {
    summary: 'run the built-in llama.cpp engine (sigil engine --model FILE.gguf)',
    help: ENGINE_USAGE,
    load: async () => {
      (await import('@sigil/engine/installed')).assertEngineInstalled();
      return import('./engine.ts');
    },
  },
  'hash-model': {
    summary: 'print the model_hash of a model file or directory',
    help: 'usage: sigil hash-model PATH [--manifest]\n\nPrints the catalogue model_hash of a weights file or directory; --manifest prints the per-file list it hashes.\n',
    load: () => import('./hash-model.ts'),
  },
  verify: { summary: 'verify a receipt and the attestation evidence', load: () => import('./verify.ts') },
  connect: {
    summary: 'a local OpenAI-compatible endpoint that verifies every answer of an attested service (sigil connect URL --help)',
    load: () => import('./connect.ts'),
  },
  measure: { summary: 'compute the launch measurements a VM must report (sigil measure self|snp|tdx --help)', load: () => import('./measure.ts') },
  release: { summary: 'sign or verify a release manifest (sigil release sign|verify --help)', load: () => import('./release.ts') },
  collateral: {
    summary: 'fetch Intel PCS, AMD KDS and NVIDIA (RIM, OCSP) collateral for evidence into a bundle (sigil collateral fetch --help)',
    load: () => import('./collateral.ts'),
  },
  log: { summary: "check a service's transparency log, or a receipt in it (sigil log verify|receipt URL --help)", load: () => import('./transparency-log.ts') },
  witness: { summary: 'cosign a transparency log checkpoint after checking it only grew (sigil witness --help)', load: () => import('./witness.ts') },
  'ohttp-relay': {
    summary: 'a minimal Oblivious HTTP relay, for a third party to run in front of a service (sigil ohttp-relay --help)',
    load: () => import('./ohttp-relay.ts'),
  },
  'verify-evidence': {
    summary: 'verify raw TDX or SEV-SNP evidence without a service (sigil verify-evidence --help)',
    load: () => import('./verify-evidence.ts'),
  },
};

/** The package's version: package.json sits two folders up from both src/cli and dist/cli. */
function version(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/**
 * commander writes the top-level help from the table, answers --version, and refuses an unknown command
 * with a suggestion; each command parses its own arguments (its `run(argv)`).
 */
function topLevel(): Program {
  const program = new Program('sigil').usage('<command> [options]').version(version(), '-v, --version', 'print the version');
  program.helpOption('-h, --help', 'print this help').helpCommand('help', 'print this help');
  for (const [name, command] of Object.entries(COMMANDS)) program.command(name).description(command.summary);
  program.configureHelp({ styleTitle: (title) => title.toLowerCase() });
  program.addHelpText('after', '\nEach command takes --help; docs/ has the rest.');
  program.exitOverride().configureOutput({ writeOut: (t) => process.stdout.write(t), writeErr: (t) => process.stderr.write(t) });
  return program;
}

export async function main(argv: string[]): Promise<number> {
  // -V as well as -v: the capital is what node, npm and most commander programs answer.
  const [name, ...rest] = argv[0] === '-V' ? ['--version', ...argv.slice(1)] : argv;
  if (name === undefined) {
    process.stderr.write(topLevel().helpInformation());
    return 2;
  }
  if (name === 'help' && rest[0] !== undefined && Object.hasOwn(COMMANDS, rest[0])) return main([rest[0], '--help']);
  if (!Object.hasOwn(COMMANDS, name)) {
    try {
      await topLevel().parseAsync([name, ...rest], { from: 'user' });
    } catch (error) {
      if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
      throw error;
    }
    return 2;
  }
  const command = COMMANDS[name]!;
  const dashDash = rest.indexOf('--');
  const options = dashDash === -1 ? rest : rest.slice(0, dashDash);
  if (command.help !== undefined && (options.includes('--help') || options.includes('-h'))) {
    process.stdout.write(command.help);
    return 0;
  }
  let run: Command;
  try {
    ({ run } = await command.load());
  } catch (error) {
    process.stderr.write(`sigil ${name}: ${(error as Error).message}\n`);
    return 1;
  }
  return run(rest);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await main(process.argv.slice(2));
}
