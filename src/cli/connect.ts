import { readFile } from 'node:fs/promises';
import { ConnectRefusal, startConnect, type ConnectOptions, type RunningConnect } from '../connect/start.ts';
import { AttestationError } from '../client/index.ts';
import { isVerifyError } from '../verify/errors.ts';
import { formatChecks } from './check-report.ts';
import { UsageError } from './cli-errors.ts';
import { parseCommandLine } from './command-line.ts';
import { RELEASE_TRUST_OPTIONS, releaseTrustFrom, releaseUsageProblem } from './release-trust.ts';

export const CONNECT_USAGE = `usage:
  sigil connect URL [--listen 127.0.0.1:PORT] [--reference FILE] [--release FILE RELEASE_TRUST] [--collateral DIR]
                [--brand NAME] [--ca FILE] [--audit-dir DIR] [--log-state FILE] [--allow-unpinned-code] [--allow-no-tee]
                [--allow-insecure-http] [--allow-unsealed-bodies]
  RELEASE_TRUST: --key PUB.pem | --identity ID --issuer URL [--trusted-root FILE]

A local OpenAI-compatible endpoint for any client (docs/connect.md). It attests the service at URL as
sigil verify does, then relays every request on loopback: bodies sealed to the attested key (EHBP), TLS
pinned to the attested key where it ends in the enclave, a receipt asked for and verified on every answer.
An answer that does not verify reaches the app as an error (502, param naming the failed check); a stream
whose receipt fails ends with an error event instead of data: [DONE]. Point the app's base URL at
http://LISTEN/v1; its API key passes through. GET / and GET /status show the verdict and the receipts.

  --listen HOST:PORT     where the app connects, loopback only (default 127.0.0.1:8480; port 0: any free one)
  --reference FILE       reference values (docs/auditing.md), as sigil verify takes them
  --release FILE         a signed release manifest whose values are reference values, with RELEASE_TRUST
  --collateral DIR       a collateral bundle (sigil collateral fetch), used offline as sigil verify uses it
  --brand NAME           the brand word of the service's header names (default Service)
  --ca FILE              extra CA certificates (PEM) for a load balancer that ends TLS before the enclave
  --audit-dir DIR        keep every receipt, the bytes it covers and the evidence it was verified against;
                         sigil verify --audit DIR checks them again offline (the files hold your prompts)
  --log-state FILE       keep the service's log checkpoints seen across runs (default: in memory); each receipt
                         is checked to be in the attested transparency log, failures on stderr and /status
  --allow-unpinned-code  accept measured values no reference value pins (each is WAIVED)
  --allow-no-tee         accept a development service without hardware (tee "none"): nothing is attested
  --allow-insecure-http  accept a plain http:// URL (only a development service can be verified so)
  --allow-unsealed-bodies  accept a service with no attested HPKE key: bodies protected only by TLS to the enclave

Exit status: runs until interrupted (0); 1 the service did not verify (nothing was sent); 2 bad usage, a port in use,
or flags missing that would accept what the service lacks (all named in one message).
`;

interface ConnectIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** Resolves when the command should stop (a signal); the CLI waits for SIGINT or SIGTERM. */
  stopped: Promise<unknown>;
  onListening?: (running: RunningConnect) => void;
}

async function readText(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new UsageError(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

function parseListen(value: string): { host: string; port: number } {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:]+):(\d{1,5})$/.exec(value);
  if (match === null || Number(match[2]) > 65535) throw new UsageError('--listen is HOST:PORT, e.g. 127.0.0.1:8480');
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port: Number(match[2]) };
}

async function optionsFrom(argv: string[]): Promise<ConnectOptions | 'help'> {
  const parsed = parseCommandLine({
    args: argv,
    allowPositionals: true,
    options: {
      listen: { type: 'string', default: '127.0.0.1:8480' },
      reference: { type: 'string' },
      release: { type: 'string' },
      ...RELEASE_TRUST_OPTIONS,
      collateral: { type: 'string' },
      brand: { type: 'string' },
      ca: { type: 'string' },
      'audit-dir': { type: 'string' },
      'log-state': { type: 'string' },
      'allow-unpinned-code': { type: 'boolean', default: false },
      'allow-no-tee': { type: 'boolean', default: false },
      'allow-insecure-http': { type: 'boolean', default: false },
      'allow-unsealed-bodies': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const { values: v, positionals } = parsed;
  if (v.help) return 'help';
  if (positionals.length !== 1) throw new UsageError('give the service URL, e.g. sigil connect https://inference.example.com');
  const trust = { key: v.key, identity: v.identity, issuer: v.issuer, 'trusted-root': v['trusted-root'] };
  const problem = releaseUsageProblem(v.release, trust);
  if (problem !== undefined) throw new UsageError(problem);
  if (v.brand !== undefined && !/^[A-Za-z0-9-]+$/.test(v.brand)) throw new UsageError('--brand is one word of letters, digits and hyphens');
  const options: ConnectOptions = {
    service: positionals[0]!,
    listen: parseListen(v.listen),
    allowUnpinnedCode: v['allow-unpinned-code'],
    allowNoTee: v['allow-no-tee'],
    allowInsecureHttp: v['allow-insecure-http'],
    allowUnsealedBodies: v['allow-unsealed-bodies'],
  };
  if (v.reference !== undefined) options.reference = v.reference;
  if (v.collateral !== undefined) options.collateral = v.collateral;
  if (v.brand !== undefined) options.brand = v.brand;
  if (v['audit-dir'] !== undefined) options.auditDir = v['audit-dir'];
  if (v['log-state'] !== undefined) options.logStateFile = v['log-state'];
  if (v.ca !== undefined) options.ca = (await readText(v.ca, 'CA file')).toString('utf8');
  if (v.release !== undefined) {
    const releaseTrust = await releaseTrustFrom(trust, { read: readText, usage: (m) => new UsageError(m), unreadable: (m) => new UsageError(m) });
    options.release = { bundle: v.release, trust: releaseTrust };
  }
  return options;
}

/** `sigil connect` with its output and its stop signal given, so tests run it in-process. */
export async function connectCommand(argv: string[], io: ConnectIo): Promise<number> {
  let options: ConnectOptions | 'help';
  try {
    options = await optionsFrom(argv);
  } catch (err) {
    io.stderr.write(`sigil connect: ${(err as Error).message}\n\n${CONNECT_USAGE}`);
    return 2;
  }
  if (options === 'help') {
    io.stdout.write(CONNECT_USAGE);
    return 0;
  }
  let running: RunningConnect;
  options.onFailedReceipt = (line) => io.stderr.write(`sigil connect: ${line}\n`);
  try {
    running = await startConnect(options);
  } catch (err) {
    if (err instanceof AttestationError) {
      io.stderr.write(formatChecks(err.checks));
      io.stderr.write(`sigil connect: ${err.message}\n`);
      return 1;
    }
    if (err instanceof ConnectRefusal && err.checks !== undefined) io.stderr.write(formatChecks(err.checks));
    if (err instanceof ConnectRefusal || isVerifyError(err) || err instanceof TypeError) {
      io.stderr.write(`sigil connect: ${(err as Error).message}\n`);
      return err instanceof ConnectRefusal || err instanceof TypeError ? 2 : 1;
    }
    io.stderr.write(`sigil connect: could not reach or verify ${options.service}: ${(err as Error).message}\n`);
    return 1;
  }
  const attestation = running.fetch.attestation;
  io.stdout.write(formatChecks(attestation.checks));
  io.stdout.write(`sigil connect: ${options.service} verified; point your client at ${running.url}/v1 (status: ${running.url}/)\n`);
  io.onListening?.(running);
  await io.stopped;
  await running.close();
  return 0;
}

export async function run(argv: string[]): Promise<number> {
  const stopped = new Promise((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  return connectCommand(argv, { stdout: process.stdout, stderr: process.stderr, stopped });
}
