import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, type LogFormat } from '../../src/logger/logger.ts';

/** A stream standing for stdout, a terminal or not; what the logger wrote to it. */
function output(isTTY: boolean): { stream: PassThrough & { isTTY?: boolean }; text: () => string } {
  const stream = Object.assign(new PassThrough(), { isTTY });
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return { stream, text: () => text };
}

function logOnce(isTTY: boolean, format: LogFormat): string {
  const out = output(isTTY);
  const logger = createLogger('info', out.stream, format);
  logger.info({ url: 'http://127.0.0.1:8080', workers: 1, tee: 'none', note: 'two words' }, 'sigil listening');
  logger.warn('no API keys');
  return out.text();
}

describe('the log on a terminal and elsewhere', () => {
  it('auto on a terminal: one readable line per entry, every field shown, warnings coloured', () => {
    const lines = logOnce(true, 'auto').split('\n');
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d INFO {2}sigil listening {2}url=http:\/\/127\.0\.0\.1:8080 workers=1 tee=none note="two words"$/);
    expect(lines[1]!.slice(8)).toBe(' \x1b[33mWARN \x1b[0m no API keys');
  });

  it('auto elsewhere, and json anywhere: JSON lines', () => {
    for (const [isTTY, format] of [
      [false, 'auto'],
      [true, 'json'],
    ] as const) {
      const lines = logOnce(isTTY, format).trim().split('\n');
      expect(lines).toHaveLength(2);
      expect(JSON.parse(lines[0]!)).toMatchObject({ level: 30, msg: 'sigil listening', url: 'http://127.0.0.1:8080', service: 'sigil' });
    }
  });

  it('pretty when asked, without colour codes when the output is not a terminal', () => {
    const text = logOnce(false, 'pretty');
    expect(text).toMatch(/^\d\d:\d\d:\d\d INFO {2}sigil listening/);
    expect(text).toMatch(/\n\d\d:\d\d:\d\d WARN {2}no API keys\n$/);
  });
});
