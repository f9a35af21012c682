import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

/** The in-process sockets of requests the Oblivious HTTP gateway opened (src/http/routes/ohttp-gateway.ts). */
const innerSockets = new WeakSet<Duplex>();

export function markObliviousSocket(socket: Duplex): void {
  innerSockets.add(socket);
}

/** Whether `req` was opened from an encapsulated request (docs/ohttp.md): it has no client address, and its stream writes are padded as sealed ones are. */
export function cameThroughGateway(req: IncomingMessage): boolean {
  return innerSockets.has(req.socket);
}
