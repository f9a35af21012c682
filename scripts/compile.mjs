// npm run build's compile step. node-llama-cpp is optional: a proxy-only install
// (`npm install --omit=optional`) lacks its types, so the engine's sources compile against a stand-in
// declaration (scripts/proxy-only/) and `sigil engine` says at run time that the engine is not installed.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let project = 'tsconfig.build.json';
try {
  require.resolve('node-llama-cpp');
} catch {
  project = 'tsconfig.proxy-only.json';
  process.stderr.write('build: node-llama-cpp is not installed: building the proxy without the built-in engine\n');
}
const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', project], { stdio: 'inherit' });
process.exitCode = tsc.status ?? 1;
