import { ENGINE_USAGE } from './engine-usage.ts';

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
    summary: 'run the proxy (sigil serve [--config FILE])',
    help: 'usage: sigil serve [--config FILE]\n\nRuns the proxy. The config is FILE, else $SIGIL_CONFIG, else config/sigil.yaml.\nWith no upstream configured, starts the built-in engine with a generated demo model.\nSIGHUP reloads the keys file and the catalogue; SIGTERM drains and exits.\n',
    load: () => import('./serve.ts'),
  },
  keys: {
    summary: 'manage API keys (sigil keys add|list|revoke PREFIX)',
    help: 'usage: sigil keys add [--label TEXT] [--config FILE]\n       sigil keys list [--config FILE]\n       sigil keys revoke ID-PREFIX [--config FILE]\n\nadd prints a new key once and stores only its SHA-256 in auth.keys_file.\n',
    load: () => import('./keys.ts'),
  },
  engine: {
    summary: 'run the built-in llama.cpp engine (sigil engine --model FILE.gguf)',
    help: ENGINE_USAGE,
    load: async () => {
      (await import('../engine/installed.ts')).assertEngineInstalled();
      return import('./engine.ts');
    },
  },
  'hash-model': {
    summary: 'print the model_hash of a model file or directory',
    help: 'usage: sigil hash-model PATH [--manifest]\n\nPrints the catalogue model_hash of a weights file or directory; --manifest prints the per-file list it hashes.\n',
    load: () => import('./hash-model.ts'),
  },
  measure: {
    summary: 'print what Sigil measures (sigil measure self [--config FILE] [--files])',
    load: async () => ({ run: async ([what, ...rest]) => (what === 'self' ? (await import('./measure-self.ts')).run(rest) : (process.stderr.write('usage: sigil measure self [--config FILE] [--files]\n'), 2)) }),
  },
  verify: { summary: 'verify a receipt and the attestation evidence', load: () => import('./verify.ts') },
  'verify-evidence': { summary: 'verify raw TDX or SEV-SNP evidence without a service (sigil verify-evidence --help)', load: () => import('./verify-evidence.ts') },
};

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(15)} ${c.summary}`);
  return `usage: sigil <command> [options]\n\ncommands:\n${lines.join('\n')}\n`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`sigil: unknown command '${name}'\n\n${usage()}`);
    return 2;
  }
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
