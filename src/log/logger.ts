import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout. Nothing a client sent or received is ever passed to the logger, and
 * `authorization` is redacted in case a future field carries headers by mistake.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  const options = { level, base: { service: 'sigil' }, redact: { paths: ['*.authorization', 'authorization', '*.headers'], remove: true } };
  return destination ? pino(options, destination) : pino(options);
}
