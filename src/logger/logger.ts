import { pino, type Logger } from 'pino';
import { prettyDestination } from './pretty-lines.ts';

export type { Logger };

/** `log.format`: JSON lines, lines for a person, or pretty when the output is a terminal. */
export type LogFormat = 'auto' | 'json' | 'pretty';

/**
 * JSON lines on stdout (pretty on a terminal unless `json` is asked for). Nothing a client sent or
 * received is ever passed to the logger, and `authorization` is redacted in case a future field carries
 * headers by mistake.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream & { isTTY?: boolean }, format: LogFormat = 'auto'): Logger {
  const options = {
    level,
    base: { service: 'sigil' },
    redact: { paths: ['*.authorization', 'authorization', '*["x-api-key"]', '["x-api-key"]', '*.headers'], remove: true },
  };
  const out = destination ?? process.stdout;
  if (format === 'pretty' || (format === 'auto' && out.isTTY === true)) return pino(options, prettyDestination(out));
  return destination ? pino(options, destination) : pino(options);
}
