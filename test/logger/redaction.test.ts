import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger/logger.ts';

describe('the logger', () => {
  it("never writes an API key, whether it came as Authorization or as Anthropic's x-api-key", () => {
    let out = '';
    const logger = createLogger('info', new Writable({ write: (chunk, _encoding, done) => ((out += String(chunk)), done()) }), 'json');
    logger.info({ 'x-api-key': 'sk-top', authorization: 'Bearer sk-auth', req: { 'x-api-key': 'sk-nested', authorization: 'Bearer sk-n' } }, 'request');
    expect(JSON.parse(out)).toMatchObject({ msg: 'request', req: {} });
    expect(out).not.toMatch(/sk-/);
  });
});
