import { readFileSync } from 'node:fs';
import { chooseSubcommand, parseCommandLine, usageExit, type CommandLine, type CommandSpec } from './command-line.ts';
import { describeError } from '../protocol/sigil-error.ts';
import { fail, notPinned, pass, verdictOf, waive, type Check } from '../verify/check.ts';
import type { VerifiedCheckpoint } from '../protocol/tlog/checkpoint.ts';
import { formatVerifierKey } from '../protocol/tlog/note.ts';
import { fetchCheckpoint, openLogCheckpoint, verifyLogConsistency, verifyReceiptInLog, verifyWholeLog } from '../verify/tlog/log-client.ts';
import { checkAgainstSeen } from '../verify/tlog/seen-checkpoints.ts';
import { formatChecks } from './check-report.ts';
import { UsageError } from './cli-errors.ts';
import { resolveLog, witnessPolicy, type LogTarget } from './log-target.ts';

const URL_OPERAND = [['<URL>', 'the service (https://host) or the log itself (https://host/v1/log)']] as const;

const LOG_OPTIONS = {
  'log-key': {
    type: 'string',
    value: 'VKEY',
    description: "the log's checkpoint key (C2SP verifier key); default: the one the attestation binding names (NOT PINNED)",
  },
  checkpoint: { type: 'string', value: 'FILE', description: 'check against this signed checkpoint (e.g. one witnesses cosigned) instead of the latest' },
  witness: { type: 'string', value: 'VKEY', description: "a witness's cosignature/v1 key", multiple: true },
  witnesses: { type: 'string', value: 'N', description: 'how many of them must have cosigned (default: all named; 0 waives witnessing)' },
  state: { type: 'string', value: 'FILE', description: 'the checkpoints seen before: each new one must extend the last (docs/log.md#verifying)' },
} as const;

const verifyCommand = {
  name: 'log verify',
  summary: 'Checks the whole log: every entry bundle and tile hashes to the checkpoint, signed by the log key.',
  operands: URL_OPERAND,
  options: LOG_OPTIONS,
} as const satisfies CommandSpec;

const receiptCommand = {
  name: 'log receipt',
  summary: 'Checks one receipt is in the log: its inclusion proof leads to the checkpoint (also: sigil verify RECEIPT --url BASE --log).',
  operands: URL_OPERAND,
  options: {
    receipt: { type: 'string', value: 'JWS|FILE', description: 'the receipt, or a file holding it (required)' },
    index: { type: 'string', value: 'N', description: 'its index in the log, when known' },
    ...LOG_OPTIONS,
  },
} as const satisfies CommandSpec;

export const command = {
  name: 'log',
  summary: "Checks a service's transparency log, or a receipt in it.",
  options: {},
  subcommands: [verifyCommand, receiptCommand],
} as const satisfies CommandSpec;

/** The checkpoint to check against: the latest, or a given (cosigned) one the latest must extend. */
async function checkpointChecks(
  target: LogTarget,
  file: string | undefined,
  state: string | undefined,
  noWitnesses: boolean,
): Promise<{ checks: Check[]; checkpoint?: VerifiedCheckpoint }> {
  const { log } = target;
  const checks: Check[] = [target.keyCheck];
  let checkpoint: VerifiedCheckpoint;
  try {
    checkpoint = file === undefined ? await fetchCheckpoint(log) : openLogCheckpoint(log, readFileSync(file, 'utf8'));
    const latest = file === undefined ? checkpoint : await fetchCheckpoint({ ...log, witnesses: { witnesses: [], required: 0 } });
    if (latest !== checkpoint) await verifyLogConsistency(log, checkpoint, latest);
  } catch (err) {
    const witnessing = (err as { code?: string }).code === 'ERR_TLOG_WITNESS';
    checks.push(fail(witnessing ? 'log.witnesses' : 'log.checkpoint', describeError(err)));
    return { checks };
  }
  checks.push(
    pass(
      'log.checkpoint',
      `the log key signed the checkpoint of origin ${checkpoint.origin}: ${checkpoint.size} entries, root ${checkpoint.root.toString('base64')}`,
    ),
  );
  const required = log.witnesses?.required ?? 0;
  checks.push(
    required === 0 && noWitnesses
      ? waive(fail('log.witnesses', 'no witness cosignature was checked'), '--witnesses 0: a log could show another history to someone else unseen')
      : required === 0
        ? notPinned('log.witnesses', 'no witness cosignature was required (--witness, --witnesses): a log could show another history to someone else unseen')
        : pass(
            'log.witnesses',
            `${checkpoint.cosigners.length} of the required ${required} witnesses cosigned it: ${checkpoint.cosigners.map((c) => `${c.name} at ${new Date(c.timestamp * 1000).toISOString()}`).join(', ')}`,
          ),
  );
  if (state === undefined) {
    checks.push(notPinned('log.consistency', 'no --state: nothing says this checkpoint extends the ones seen before'));
  } else {
    try {
      const previous = await checkAgainstSeen(state, log, checkpoint);
      checks.push(
        pass(
          'log.consistency',
          previous === undefined
            ? `first checkpoint of this origin in ${state}; kept, so the next one must extend it`
            : `the log's consistency proof shows the tree of ${previous.size} entries seen before is a prefix of this one: it only grew`,
        ),
      );
    } catch (err) {
      checks.push(fail('log.consistency', `${describeError(err)} (against the checkpoint kept in ${state})`));
      return { checks };
    }
  }
  return { checks, checkpoint };
}

/**
 * For a log whose every check passed but some were compared with nothing: the options that would pin them, with the
 * values seen now, so the next run can hold the log to them (docs/log.md#verifying).
 */
function whatToPin(checks: readonly Check[], target: LogTarget): string {
  const verdict = verdictOf(checks);
  if (verdict.failed.length > 0 || verdict.notPinned.length === 0) return '';
  const lines: string[] = [];
  for (const check of verdict.notPinned) {
    if (check.name === 'log.key')
      lines.push(
        `  --log-key ${formatVerifierKey(target.log.key)}   the key seen now; check it against the service's attested binding (sigil verify) once, then pin it`,
      );
    if (check.name === 'log.witnesses')
      lines.push('  --witness VKEY [--witnesses N]   the cosignature keys of witnesses you trust (the operator publishes which witness the log)');
    if (check.name === 'log.consistency')
      lines.push(`  --state ${stateFileFor(target.log.origin)}   a file of your own: each later run checks the log only grew from what this one saw`);
  }
  return `\nThe log holds together, but nothing pins it yet. To hold it to what you trust, run again with:\n${lines.join('\n')}\n`;
}

/** A state file name a user can keep per log: the origin, made a file name. */
const stateFileFor = (origin: string) => `sigil-log-${origin.replace(/[^A-Za-z0-9.-]+/gu, '_')}.json`;

function readReceipt(value: string): string {
  const jws = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(value.trim()) ? value.trim() : readFileSync(value, 'utf8').trim();
  if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(jws)) throw new UsageError('--receipt is neither a compact JWS nor a file holding one');
  return jws;
}

export async function run(argv: string[]): Promise<number> {
  const chosen = chooseSubcommand(command, argv);
  if (typeof chosen === 'number') return chosen;
  const action = chosen.sub === verifyCommand ? 'verify' : 'receipt';
  // verify's options are receipt's but --receipt and --index: its line holds neither.
  const parsed = parseCommandLine(chosen.sub === verifyCommand ? verifyCommand : receiptCommand, chosen.argv) as
    CommandLine<typeof receiptCommand.options> | number;
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  const url = positionals[0]!;
  try {
    if (action === 'receipt' && values.receipt === undefined) throw new UsageError('give --receipt JWS|FILE: the receipt to find in the log');
    const policy = witnessPolicy(values.witness, values.witnesses);
    const target = await resolveLog(url, values['log-key'], policy.witnesses, policy.required);
    const { checks, checkpoint } = await checkpointChecks(target, values.checkpoint, values.state, values.witnesses === '0');
    if (checkpoint !== undefined && action === 'verify') {
      const started = performance.now();
      try {
        const report = await verifyWholeLog(target.log, checkpoint);
        const seconds = ((performance.now() - started) / 1000).toFixed(1);
        checks.push(
          pass(
            'log.tiles',
            `all ${report.entries} entries are 32-byte receipt hashes, and the ${report.tiles} tiles and bundles hash to the checkpoint's root (${seconds} s)`,
          ),
        );
      } catch (err) {
        checks.push(fail('log.tiles', describeError(err)));
      }
    }
    if (checkpoint !== undefined && action === 'receipt') {
      const jws = readReceipt(values.receipt!);
      try {
        const index = values.index === undefined ? undefined : Number(values.index);
        const found = await verifyReceiptInLog(target.log, jws, { checkpoint, ...(index === undefined ? {} : { index }) });
        checks.push(
          pass(
            'log.inclusion',
            `the receipt is entry ${found.index} of the log: its inclusion proof leads from SHA-256 of the receipt to the checkpoint's root`,
          ),
        );
      } catch (err) {
        checks.push(fail('log.inclusion', describeError(err)));
      }
    }
    process.stdout.write(formatChecks(checks) + whatToPin(checks, target));
    return verdictOf(checks).outcome === 'not-verified' ? 1 : 0;
  } catch (err) {
    const usage = usageExit(chosen.sub, err);
    if (usage !== undefined) return usage;
    process.stderr.write(`sigil log: ${describeError(err)}\n`);
    return 1;
  }
}
