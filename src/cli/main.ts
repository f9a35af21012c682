/** The `sigil` command: each subcommand lives in its own module and is loaded only when used. */
export type Command = (argv: string[]) => Promise<number>;

const COMMANDS: Record<string, { summary: string; load: () => Promise<{ run: Command }> }> = {
  serve: { summary: 'run the proxy (sigil serve [--config FILE])', load: () => import('./serve.ts') },
  keys: { summary: 'manage API keys (sigil keys add|list|revoke PREFIX)', load: () => import('./keys.ts') },
  engine: {
    summary: 'run the built-in llama.cpp engine (sigil engine --model FILE.gguf)',
    load: async () => {
      (await import('../engine/installed.ts')).assertEngineInstalled();
      return import('./engine.ts');
    },
  },
  'hash-model': { summary: 'print the model_hash of a model file or directory', load: () => import('./hash-model.ts') },
  verify: { summary: 'verify a receipt and the attestation evidence', load: () => import('./verify.ts') },
};

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(11)} ${c.summary}`);
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
