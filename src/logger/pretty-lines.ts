/**
 * Pino's JSON lines as a person reads them on a terminal: `12:04:31 INFO  message key=value ...`. Only
 * the rendering changes: every field the JSON line has is shown, none is added.
 */
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO ', 40: 'WARN ', 50: 'ERROR', 60: 'FATAL' };
const COLOURS: Record<number, string> = { 40: '\x1b[33m', 50: '\x1b[31m', 60: '\x1b[31m' };
/** Fields every line carries, shown by the line's shape instead. */
const SHOWN_AS_SHAPE = new Set(['time', 'level', 'msg', 'service', 'pid', 'hostname']);

export function prettyLine(json: string, colour: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const time = typeof entry.time === 'number' ? new Date(entry.time).toISOString().slice(11, 19) : '--:--:--';
  const level = typeof entry.level === 'number' ? entry.level : 30;
  const label = LEVELS[level] ?? String(level);
  const fields = Object.entries(entry)
    .filter(([key]) => !SHOWN_AS_SHAPE.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' && /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)}`);
  const head = colour && COLOURS[level] !== undefined ? `${COLOURS[level]}${label}\x1b[0m` : label;
  return `${time} ${head} ${String(entry.msg ?? '')}${fields.length > 0 ? `  ${fields.join(' ')}` : ''}\n`;
}

/** A pino destination that writes each line pretty to `out`. */
export function prettyDestination(out: NodeJS.WritableStream & { isTTY?: boolean }): { write(line: string): void } {
  return { write: (line: string) => void out.write(prettyLine(line, out.isTTY === true)) };
}
