import type { ServerResponse } from 'node:http';

/** The answer leaves in slices this large, each after the previous one drained: a stalled client shows as no drain. */
const SLICE_BYTES = 64 * 1024;

/**
 * Ends `res` with `body`, and cuts a client that stops reading: when no slice of it drains for
 * `timeoutMs` (nginx's `send_timeout`, between two writes), `onCut` runs and the connection is
 * destroyed, so an answer nobody reads does not stay in memory. Slices are views, never copies.
 * `last`, when given, is written on its own after the body (a sealed receipt frame).
 */
export function endUnlessStalled(res: ServerResponse, body: Buffer, timeoutMs: number, onCut: () => void, last?: string): void {
  // The usual answer: one slice, taken by the kernel at once. Nothing is left to watch (no timer, no listeners).
  if (body.length <= SLICE_BYTES && last === undefined) {
    res.end(body);
    if (res.writableLength === 0) return;
    watch(res, timeoutMs, onCut);
    return;
  }
  let offset = 0;
  let timer: NodeJS.Timeout | undefined;
  const stop = () => clearTimeout(timer);
  const arm = () => {
    stop();
    timer = setTimeout(() => {
      onCut();
      res.destroy();
    }, timeoutMs);
    timer.unref();
  };
  const pump = () => {
    arm();
    while (body.length - offset > SLICE_BYTES) {
      const slice = body.subarray(offset, offset + SLICE_BYTES);
      offset += SLICE_BYTES;
      if (!res.write(slice)) {
        res.once('drain', pump);
        return;
      }
    }
    const rest = offset === 0 ? body : body.subarray(offset);
    if (last === undefined) {
      res.end(rest);
    } else {
      res.write(rest);
      res.end(last);
    }
  };
  res.once('finish', stop);
  res.once('close', stop);
  pump();
}

/** Cuts `res` when what is left of it does not drain within `timeoutMs`. */
function watch(res: ServerResponse, timeoutMs: number, onCut: () => void): void {
  const timer = setTimeout(() => {
    onCut();
    res.destroy();
  }, timeoutMs);
  timer.unref();
  const stop = () => clearTimeout(timer);
  res.once('finish', stop);
  res.once('close', stop);
}
