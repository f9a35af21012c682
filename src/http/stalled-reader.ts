import type { ServerResponse } from 'node:http';

/** Bytes handed to the socket and not yet written: libuv's queue, which shrinks as a big write drains (the stream's own count does not). */
function unwritten(res: ServerResponse): number {
  const socket = res.socket as (ServerResponse['socket'] & { _handle?: { writeQueueSize?: number } }) | null;
  return socket?._handle?.writeQueueSize ?? socket?.writableLength ?? 0;
}

/**
 * Cuts a response whose client stops reading: when no byte of it leaves for `timeoutMs`, `onCut`
 * runs and the connection is destroyed, so an answer nobody reads does not stay in memory.
 */
export function cutStalledReader(res: ServerResponse, timeoutMs: number, onCut: () => void): void {
  let pending = unwritten(res);
  let progressAt = Date.now();
  const timer = setInterval(
    () => {
      const now = unwritten(res);
      if (now < pending || now === 0) {
        pending = now;
        progressAt = Date.now();
        return;
      }
      if (Date.now() - progressAt < timeoutMs) return;
      clearInterval(timer);
      onCut();
      res.destroy();
    },
    Math.max(10, Math.min(1000, timeoutMs / 4)),
  );
  timer.unref();
  const stop = () => clearInterval(timer);
  res.once('finish', stop);
  res.once('close', stop);
}
