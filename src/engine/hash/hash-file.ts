import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

/** Lowercase hex SHA-256 of a file's bytes, read as a stream (model files are gigabytes); `onBytes` hears each chunk's size. */
export async function sha256File(path: string, onBytes?: (bytes: number) => void): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 22 })) {
    hash.update(chunk as Buffer);
    onBytes?.((chunk as Buffer).length);
  }
  return hash.digest('hex');
}
