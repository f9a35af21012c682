// What `npm run build` reads: the prestart compares their times with the last build's, and the tests that build a
// copy of the tree copy exactly these.
export const BUILD_INPUTS = [
  'src',
  'packages/engine',
  'scripts',
  'bin',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'tsconfig.proxy-only.json',
];
