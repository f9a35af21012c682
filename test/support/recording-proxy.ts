import { createServer, connect, type AddressInfo, type Socket } from 'node:net';

/**
 * A TCP relay on a loopback port that keeps every byte both ways: what a load balancer, or anyone on the
 * path between the client and the enclave, gets to see.
 */
export interface RecordingProxy {
  url: string;
  /** Every byte clients sent and the server answered since the last `forget()`, as latin1 text. */
  record(): string;
  /** The address of each connection it accepted since it started, oldest first: who connected to the target's side. */
  peers(): string[];
  /** Drops what was recorded so far (the attestation fetched before the exchange under test, say). */
  forget(): void;
  close(): Promise<void>;
}

/** `localAddress`: the address the target sees it connect from (a client's own address, say); the kernel's choice by default. */
export async function startRecordingProxy(
  target: { host: string; port: number },
  scheme = 'http',
  options: { localAddress?: string } = {},
): Promise<RecordingProxy> {
  const sockets = new Set<Socket>();
  let chunks: Buffer[] = [];
  const peers: string[] = [];
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = createServer((client) => {
    track(client);
    peers.push(client.remoteAddress ?? '');
    const upstream = connect({ port: target.port, host: target.host, ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }) });
    track(upstream);
    client.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      client.write(chunk);
    });
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`,
    record: () => Buffer.concat(chunks).toString('latin1'),
    peers: () => [...peers],
    forget: () => {
      chunks = [];
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
