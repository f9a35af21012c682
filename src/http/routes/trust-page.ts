import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { httpError } from '../../protocol/errors.ts';

/** The files of the built trust page (docs/trust-page.md), by request path: nothing else under it is served. */
const FILES: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/trust/app.js': { file: 'trust/app.js', type: 'text/javascript; charset=utf-8' },
  '/trust/styles.css': { file: 'trust/styles.css', type: 'text/css; charset=utf-8' },
};

export const TRUST_PAGE_PATHS = Object.keys(FILES);

/**
 * The page may call any Sigil URL the user points it at (connect-src), but runs only its own script
 * and style, and cannot be framed.
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src *; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

/** The folder `npm run build` bundles the page into: dist/trust-page at the package root. */
export function defaultTrustPageDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return join(dir, 'dist', 'trust-page');
}

/** GET / and the page's two assets, read once at start; a missing build answers 404 saying how to make it. */
export function createTrustPageHandler(dir: string) {
  const bodies = new Map<string, Buffer>();
  for (const [path, { file }] of Object.entries(FILES)) {
    const full = join(dir, file);
    if (existsSync(full)) bodies.set(path, readFileSync(full));
  }
  return function handleTrustPage(req: IncomingMessage, res: ServerResponse, path: string): void {
    const body = bodies.get(path);
    if (body === undefined) throw httpError('not_found', 'The trust page is not built here: run `npm run build`.');
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': FILES[path]!.type, 'content-length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
}
