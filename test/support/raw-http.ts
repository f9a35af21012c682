import { connect, type Socket } from 'node:net';

/** What came back on a raw connection: the bytes, and whether the server closed it. */
export interface RawExchange {
  raw: Buffer;
  text: string;
  /** Status codes of every response found in the bytes, in order (pipelined answers included). */
  statuses: number[];
  /** The server closed (or reset) the connection before `waitMs` ran out. */
  closed: boolean;
}

/** The origin's host and port, from a URL such as `http://127.0.0.1:1234`. */
export function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

/**
 * Writes `parts` on a fresh TCP connection (with `gapMs` between them) and collects every byte the
 * server sends until it closes the connection or `waitMs` passes after the last write.
 */
export async function rawRequest(url: string, parts: Array<string | Buffer>, options: { waitMs?: number; gapMs?: number } = {}): Promise<RawExchange> {
  const { host, port } = hostPort(url);
  const waitMs = options.waitMs ?? 1000;
  const socket: Socket = connect({ host, port });
  socket.setNoDelay(true);
  const chunks: Buffer[] = [];
  let closed = false;
  const ended = new Promise<void>((resolve) => {
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', () => {
      closed = true;
      resolve();
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  for (const [i, part] of parts.entries()) {
    // real clock: a sender's pace (gapMs between its writes) is what the server's timeouts are tested against
    if (i > 0 && options.gapMs) await new Promise((r) => setTimeout(r, options.gapMs));
    if (socket.destroyed) break;
    socket.write(part);
  }
  let timer: NodeJS.Timeout | undefined;
  // real clock: how long the server keeps a connection it does not answer is what a caller watches for (waitMs)
  await Promise.race([ended, new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
  clearTimeout(timer);
  socket.destroy();
  const raw = Buffer.concat(chunks);
  const text = raw.toString('latin1');
  const statuses = [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));
  return { raw, text, statuses, closed };
}

/** The body of the first response in a raw exchange (content-length framed). */
export function firstBody(exchange: RawExchange): string {
  const text = exchange.raw.toString('utf8');
  const split = text.indexOf('\r\n\r\n');
  if (split < 0) return '';
  const head = text.slice(0, split);
  const length = /\r\ncontent-length: *(\d+)/i.exec(head);
  const rest = text.slice(split + 4);
  return length ? Buffer.from(rest, 'utf8').subarray(0, Number(length[1])).toString('utf8') : rest;
}
