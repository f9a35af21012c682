/**
 * What Node and Sigil read from the process besides the code: `execArgv` and the environment variables that change
 * behaviour. All of them enter the manifest; those that run code the manifest cannot name (a preload, a loader, an
 * inspector, a dynamic-linker preload) stop a start on a hardware TEE.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { url as inspectorUrl } from 'node:inspector';

/** The environment variables Node (https://nodejs.org/api/cli.html#environment-variables), OpenSSL, libc and Sigil read. */
export const MEASURED_ENV = [
  'NODE_OPTIONS',
  'NODE_PATH',
  'NODE_EXTRA_CA_CERTS',
  'NODE_TLS_REJECT_UNAUTHORIZED',
  'NODE_ICU_DATA',
  'NODE_PRESERVE_SYMLINKS',
  'NODE_COMPILE_CACHE',
  'NODE_DEBUG',
  'NODE_DEBUG_NATIVE',
  'NODE_V8_COVERAGE',
  'NODE_REDIRECT_WARNINGS',
  'NODE_PENDING_DEPRECATION',
  'NODE_USE_ENV_PROXY',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'OPENSSL_CONF',
  'OPENSSL_MODULES',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'UV_THREADPOOL_SIZE',
  'TZ',
  'LD_PRELOAD',
  'LD_AUDIT',
  'LD_LIBRARY_PATH',
  'SIGIL_CONFIG',
  'SIGIL_HOST',
  'SIGIL_PORT',
] as const;

/** Names whose values are secrets: measured by SHA-256, never printed. */
const SECRET_NAME = /(?:KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)/i;

export interface ProcessRuntime {
  execArgv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  /** The inspector's URL when it is open in this process (a SIGUSR1 before Sigil could ignore it opens one); absent when closed. */
  inspectorUrl?: string | undefined;
  /** The dynamic linker's system-wide preload list; default /etc/ld.so.preload (injectable for tests). */
  ldSoPreloadPath?: string;
}

export const DEFAULT_LD_SO_PRELOAD = '/etc/ld.so.preload';

export const currentRuntime = (): ProcessRuntime => ({ execArgv: process.execArgv, env: process.env, inspectorUrl: inspectorUrl() });

/** Every measured variable that is set, by name and value (a secret's value as `sha256:` + hex); `extra` adds names the config reads. */
export function measuredEnvironment(env: ProcessRuntime['env'], extra: readonly string[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of [...MEASURED_ENV, ...extra]) {
    const value = env[name];
    if (value === undefined) continue;
    out[name] = SECRET_NAME.test(name) ? 'sha256:' + createHash('sha256').update(value, 'utf8').digest('hex') : value;
  }
  return out;
}

/** Node options that run code from outside the measured files, or let another process read and change this one. */
const CODE_OPTIONS = [
  /^(?:-r|--require)(?:=|$)/,
  /^--import(?:=|$)/,
  /^--(?:experimental-)?loader(?:=|$)/,
  /^--inspect/,
  /^--debug/,
  /^--experimental-policy/,
  // The permission model only takes rights away (docs/decisions.md), except this one, which lets the inspector open.
  /^--allow-inspector/,
  /^--eval(?:=|$)|^-e$|^-p$|^--print/,
  /^--experimental-default-type/,
  /^--env-file/,
  /^--snapshot-blob/,
];

/** Splits NODE_OPTIONS as Node does for the common cases (space separated, double quotes group). */
function splitOptions(text: string): string[] {
  return [...text.matchAll(/"((?:\\.|[^"])*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

/** Joins a flag with the value that follows it (`--require ./hook.cjs`), so the message names both. */
function withValue(options: string[], i: number): string {
  const flag = options[i]!;
  const next = options[i + 1];
  return !flag.includes('=') &&
    next !== undefined &&
    !next.startsWith('-') &&
    /^(?:-r|--require|--import|--loader|--experimental-loader|--env-file)$/.test(flag)
    ? `${flag} ${next}`
    : flag;
}

/** Each runtime option that would run unmeasured code, named with where it came from; empty when there is none. */
export function unmeasuredRuntimeOptions(runtime: ProcessRuntime): string[] {
  const found: string[] = [];
  const scan = (options: string[], where: string) =>
    options.forEach((option, i) => {
      if (CODE_OPTIONS.some((re) => re.test(option))) found.push(`${withValue(options, i)} (${where})`);
    });
  scan([...runtime.execArgv], 'node command line');
  scan(splitOptions(runtime.env.NODE_OPTIONS ?? ''), 'NODE_OPTIONS');
  for (const name of ['LD_PRELOAD', 'LD_AUDIT'] as const) {
    const value = runtime.env[name];
    if (value !== undefined && value !== '') found.push(`${name}=${value} (environment)`);
  }
  const preload = systemPreload(runtime.ldSoPreloadPath ?? DEFAULT_LD_SO_PRELOAD);
  if (preload !== undefined) found.push(preload);
  if (runtime.inspectorUrl !== undefined) found.push(`the inspector open at ${runtime.inspectorUrl} (a SIGUSR1 reached node before Sigil could ignore it)`);
  return found;
}

/** What the dynamic linker's preload file makes every program load (glibc reads it before any environment), or why it cannot be known. */
function systemPreload(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'latin1');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? undefined : `${path} (unreadable: ${code ?? (err as Error).message}, so what it preloads is unknown)`;
  }
  const libraries = text.split(/[\s:]+/).filter((word) => word !== '');
  return libraries.length === 0 ? undefined : `${path} listing ${libraries.join(' ')}`;
}
