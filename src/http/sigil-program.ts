import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Compiled (dist/*.js) Sigil is plain Node; from the TypeScript sources (tests, development) it needs tsx's loader. */
const FROM_SOURCES = import.meta.url.endsWith('.ts');
/** From the artifact (dist/sigil/) a child runs the launcher again, which checks it runs what this process measured. */
const LAUNCHER_FROM_BUNDLE = '../../bin/sigil.js';
const MAIN_PATH = import.meta.url.includes('/dist/sigil/')
  ? fileURLToPath(new URL(LAUNCHER_FROM_BUNDLE, import.meta.url))
  : fileURLToPath(new URL(FROM_SOURCES ? '../cli/main.ts' : '../cli/main.js', import.meta.url));
const LOADER_ARGS = FROM_SOURCES ? ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href] : [];

/** The arguments after `node` that run this Sigil's CLI again (append a command): how `sigil serve` runs `sigil engine`. */
export const SIGIL_PROGRAM: readonly string[] = [...LOADER_ARGS, MAIN_PATH];
