#!/usr/bin/env node
// `sigil connect` from the @sigil/client package (docs/connect.md): the same command as `sigil connect` in a clone.
const { run } = await import('../dist/connect-cli.js');
process.exitCode = await run(process.argv.slice(2));
