#!/usr/bin/env node
// `npm start`'s and `npm test`'s first step: one line saying what to install, before anything is built on a Node that cannot run it.
import { readFileSync } from 'node:fs';

const wanted = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node.replace(/^>=/, '');
const [major, minor] = process.versions.node.split('.').map(Number);
const [needMajor, needMinor] = wanted.split('.').map(Number);
if (major < needMajor || (major === needMajor && minor < needMinor)) {
  process.stderr.write(
    `sigil: needs Node ${wanted} or later (Node 24 LTS); this is Node ${process.version}. Install Node 24 LTS (https://nodejs.org/ or \`nvm install 24\`), then run npm install again.\n`,
  );
  process.exit(1);
}
