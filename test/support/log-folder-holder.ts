/**
 * A process that keeps a transparency log folder, for tests that pause it (SIGSTOP) or run it in another pid namespace:
 * `log-folder-holder.ts DIR STALE_MS` appends entries one after another and prints `durable <index>` once it is on disk, or
 * `refused <code>` and exits when the log refuses it.
 */
import { createLogger } from '../../src/logger/logger.ts';
import { HttpError } from '../../src/protocol/errors.ts';
import { TransparencyLog } from '../../src/tlog/transparency-log.ts';

const [dir, staleMs] = process.argv.slice(2);
const log = await TransparencyLog.open({
  dir: dir!,
  originPrefix: 'test.example',
  batchMs: 100,
  idsKept: 1,
  logger: createLogger('silent'),
  lockTiming: { heartbeatMs: 100, staleMs: Number(staleMs) },
});
log.start();
for (let i = 0; ; i++) {
  try {
    const index = log.append(`holder ${i}`);
    await log.whenDurable(index);
    process.stdout.write(`durable ${index}\n`);
  } catch (err) {
    process.stdout.write(`refused ${err instanceof HttpError ? err.code : (err as Error).message}\n`);
    process.exit(0);
  }
  // No pause between appends: each waits for its entry to be on disk, which paces the loop by the log's own writes.
}
