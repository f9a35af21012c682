import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { chooseSubcommand, parseCommandLine, usageExit, type CommandSpec } from './command-line.ts';
import { describeError } from '../protocol/sigil-error.ts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ED25519, parseNote, parseVerifierKey, type NoteVerifier } from '../protocol/tlog/note.ts';
import { readWitnessKey } from '../tlog/witness-key.ts';
import { WitnessState } from '../tlog/witness-state.ts';
import { witnessService } from '../tlog/witness-service.ts';
import { fetchCheckpointNote, openLogCheckpoint, verifyLogConsistency } from '../verify/tlog/log-client.ts';
import { UsageError } from './cli-errors.ts';
import { resolveLog } from './log-target.ts';

const KEY_OPTION = { type: 'string', value: 'FILE', description: "the witness's key" } as const;
const STATE_OPTION = { type: 'string', value: 'FILE', description: 'the checkpoint this witness last cosigned for each origin' } as const;

const keygenCommand = {
  name: 'witness keygen',
  summary: 'Makes a witness key (Ed25519), writes it to --key FILE (mode 0600) and prints its verifier key (cosignature/v1).',
  options: {
    name: { type: 'string', value: 'NAME', description: "the witness's name (no spaces or plus signs)" },
    key: { type: 'string', value: 'FILE', description: 'where to write the key; an existing file is never overwritten' },
  },
} as const satisfies CommandSpec;

const serveCommand = {
  name: 'witness serve',
  summary: `Serves the C2SP tlog-witness API (POST /add-checkpoint) for the logs --log names: a log pushes each checkpoint with a
consistency proof from the last one this witness cosigned (--state, kept durably before any cosignature is returned; the
same file as the pull mode's).`,
  options: {
    key: KEY_OPTION,
    state: STATE_OPTION,
    log: {
      type: 'string',
      value: '[ORIGIN ]VKEY',
      description: "a log to witness: a Sigil log by its key (its name is its origin), another log as 'ORIGIN VKEY'",
      multiple: true,
    },
    listen: { type: 'string', value: 'HOST:PORT', description: 'where logs connect' },
  },
} as const satisfies CommandSpec;

/** `sigil witness URL`: the pull mode; `keygen` and `serve` are its subcommands. */
export const command = {
  name: 'witness',
  summary: `Fetches the log's checkpoint at URL, checks its signature and, against the checkpoint this witness last cosigned
for that origin (--state), the log's consistency proof; only then cosigns it (C2SP tlog-cosignature, with a timestamp),
prints the cosigned checkpoint, adds the cosignature to --out FILE and keeps it in --state.`,
  operands: [['<URL>', "the service, or its log's URL"]],
  options: {
    key: KEY_OPTION,
    state: STATE_OPTION,
    'log-key': { type: 'string', value: 'VKEY', description: "the log's checkpoint verifier key (default: the one the service's attestation binding names)" },
    out: {
      type: 'string',
      value: 'FILE',
      description: "a cosigned checkpoint file: this cosignature is kept with other witnesses' lines for the same checkpoint",
    },
  },
  subcommands: [keygenCommand, serveCommand],
} as const satisfies CommandSpec;

type PulledState = Record<string, { size: number; root: string }>;

function keygen(name: string | undefined, file: string | undefined): number {
  if (name === undefined || file === undefined || /[\s+]/u.test(name))
    throw new UsageError('keygen needs --name NAME (no spaces or plus signs) and --key FILE');
  if (existsSync(file)) throw new UsageError(`${file} exists: a witness key is never overwritten`);
  const { privateKey } = generateKeyPairSync('ed25519');
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify({ name, private_key_pem: privateKey.export({ format: 'pem', type: 'pkcs8' }) }, null, 2) + '\n', { mode: 0o600 });
  process.stdout.write(`${readWitnessKey(file).vkey}\n`);
  return 0;
}

/** Adds `line` to the cosigned checkpoint in `file` when it holds the same checkpoint; else starts it from `note`. */
function addToOut(file: string, note: string, line: string): string {
  const text = parseNote(note).text;
  let current = note;
  if (existsSync(file)) {
    const kept = readFileSync(file, 'utf8');
    if (parseNote(kept).text === text) current = kept;
  }
  const name = line.split(' ')[1];
  const lines = current
    .slice(text.length + 1)
    .split('\n')
    .filter((l) => l !== '' && l.split(' ')[1] !== name);
  const merged = `${text}\n${[...lines, line].join('\n')}\n`;
  writeFileSync(`${file}.tmp`, merged);
  renameSync(`${file}.tmp`, file);
  return merged;
}

/** `--log VKEY` (a Sigil log: its key's name is its origin) or `--log 'ORIGIN VKEY'` (any other log's origin, then its key). */
function followedLog(value: string): { origin: string; key: NoteVerifier } {
  const space = value.lastIndexOf(' ');
  const key = parseVerifierKey(value.slice(space + 1));
  if (key.type !== ED25519) throw new UsageError(`--log ${value}: a log's checkpoint verifier key is of type 1, as its attestation binding names it`);
  return { origin: space < 0 ? key.name : value.slice(0, space), key };
}

/** `sigil witness serve`: runs until SIGTERM or SIGINT. */
async function serve(keyFile: string | undefined, stateFile: string | undefined, logs: string[] | undefined, listen: string | undefined): Promise<number> {
  const where = /^(.+):(\d{1,5})$/.exec(listen ?? '');
  if (keyFile === undefined || stateFile === undefined || logs === undefined || where === null)
    throw new UsageError('serve needs --key FILE, --state FILE, at least one --log VKEY and --listen HOST:PORT');
  const followed = logs.map(followedLog);
  const key = readWitnessKey(keyFile);
  mkdirSync(dirname(stateFile), { recursive: true });
  const state = await WitnessState.open(stateFile);
  const server = createServer(
    { keepAlive: true },
    witnessService({ key, state, logs: followed, onCosigned: (origin, size) => process.stderr.write(`cosigned ${origin} at ${size} entries\n`) }),
  );
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(Number(where[2]), where[1]!.replace(/^\[|\]$/g, ''), resolve));
  const { address, port } = server.address() as AddressInfo;
  process.stdout.write(`witness ${key.vkey} listening on http://${address.includes(':') ? `[${address}]` : address}:${port}\n`);
  await new Promise<void>((resolve) => {
    const stop = () => server.close(() => resolve());
    process.once('SIGTERM', stop).once('SIGINT', stop);
  });
  return 0;
}

export async function run(argv: string[]): Promise<number> {
  const chosen = argv[0] === 'keygen' || argv[0] === 'serve' ? chooseSubcommand(command, argv) : undefined;
  if (typeof chosen === 'number') return chosen;
  const spec: CommandSpec = chosen?.sub ?? command;
  try {
    if (chosen?.sub === keygenCommand) {
      const line = parseCommandLine(keygenCommand, chosen.argv);
      return typeof line === 'number' ? line : keygen(line.values.name, line.values.key);
    }
    if (chosen?.sub === serveCommand) {
      const line = parseCommandLine(serveCommand, chosen.argv);
      return typeof line === 'number' ? line : await serve(line.values.key, line.values.state, line.values.log, line.values.listen);
    }
    const parsed = parseCommandLine(command, argv);
    if (typeof parsed === 'number') return parsed;
    const { values, positionals } = parsed;
    if (values.key === undefined || values.state === undefined) throw new UsageError('give the log URL, --key FILE and --state FILE');
    const witness = readWitnessKey(values.key);
    const { log } = await resolveLog(positionals[0]!, values['log-key'], [], 0);
    const note = await fetchCheckpointNote(log);
    const checkpoint = openLogCheckpoint(log, note);
    const state: PulledState = existsSync(values.state) ? (JSON.parse(readFileSync(values.state, 'utf8')) as PulledState) : {};
    const last = state[checkpoint.origin];
    // The one rule of a witness: never cosign a checkpoint that does not extend the last one it cosigned.
    if (last !== undefined) await verifyLogConsistency(log, { size: last.size, root: Buffer.from(last.root, 'base64') }, checkpoint);
    const line = witness.cosign(checkpoint.text, Math.floor(Date.now() / 1000)).trimEnd();
    const cosigned = values.out === undefined ? `${note}${line}\n` : addToOut(values.out, note, line);
    state[checkpoint.origin] = { size: checkpoint.size, root: checkpoint.root.toString('base64') };
    mkdirSync(dirname(values.state), { recursive: true });
    writeFileSync(`${values.state}.tmp`, JSON.stringify(state, null, 2) + '\n');
    renameSync(`${values.state}.tmp`, values.state);
    process.stdout.write(cosigned);
    process.stderr.write(
      last === undefined
        ? `cosigned ${checkpoint.origin} at ${checkpoint.size} entries (first checkpoint of this origin for this witness)\n`
        : `cosigned ${checkpoint.origin} at ${checkpoint.size} entries: consistent with the ${last.size} cosigned before\n`,
    );
    return 0;
  } catch (err) {
    const usage = usageExit(spec, err);
    if (usage !== undefined) return usage;
    process.stderr.write(`sigil witness: refused: ${describeError(err)}\n`);
    return 1;
  }
}
