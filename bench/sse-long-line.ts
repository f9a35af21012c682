/**
 * The SSE relay's work on one long line must grow linearly with its length.
 * Relays a single `data:` line of N MiB (in 64 KiB engine writes, rename mode, the mode that used to
 * re-copy and re-scan the pending line on every chunk) for N = 4, 8 and 16, and prints the CPU time
 * of each and the ratio of 16 MiB to 4 MiB: about 4 when linear, about 16 when quadratic.
 * Run: npx tsx bench/sse-long-line.ts
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { teeSseStream } from '../src/proxy/sse-relay.ts';

const WRITE = 64 * 1024;

async function relayOnce(mib: number): Promise<number> {
  const piece = Buffer.alloc(WRITE, 0x61);
  const writes = (mib * 1024 * 1024) / WRITE;
  let started = 0n;
  let cpu = 0n;
  const server = createServer((_req, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const source = new Readable({ read() {} });
    const before = process.cpuUsage();
    started = process.hrtime.bigint();
    void teeSseStream({ source, sink: res, rewriteModel: 'catalogue-id', forReceipt: true, maxEventBytes: 64 * 1024 * 1024 }).then(() => {
      const used = process.cpuUsage(before);
      cpu = BigInt(used.user + used.system);
      res.end();
    });
    source.push('data: {"id":"c","model":"engine-name","x":"');
    for (let i = 0; i < writes; i++) source.push(piece);
    source.push('"}\n\ndata: [DONE]\n\n');
    source.push(null);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  await res.arrayBuffer();
  await new Promise((r) => server.close(r));
  void started;
  return Number(cpu) / 1000;
}

const sizes = [4, 8, 16];
const times: number[] = [];
for (const mib of sizes) times.push(await relayOnce(mib));
for (const [i, mib] of sizes.entries()) console.log(`${mib} MiB line: ${times[i]!.toFixed(0)} ms CPU`);
console.log(`ratio 16 MiB / 4 MiB: ${(times[2]! / times[0]!).toFixed(2)} (linear ~4, quadratic ~16)`);
