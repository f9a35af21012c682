import { createServer, connect as netConnect, type AddressInfo, type Server, type Socket } from 'node:net';
import { connect as tlsConnect, TLSSocket, createSecureContext } from 'node:tls';
import { makeSelfSignedCredentials } from '../../src/tls/self-signed.ts';

/**
 * A man in the middle on a loopback port, in front of a TLS server. `pass` relays the encrypted bytes
 * untouched (the client talks to the real server); `intercept` ends TLS itself with its own key and a
 * valid-looking certificate for the same name, reads everything in plaintext and forwards it over its own
 * TLS connection to the server. Every plaintext byte it read from clients is kept in `seen`.
 */
export interface TlsMitm {
  url: string;
  mode: 'pass' | 'intercept';
  /** Switches mode and cuts every open connection, so the next request connects anew. */
  setMode(mode: 'pass' | 'intercept'): void;
  /** The plaintext it read from clients while intercepting. */
  seen(): string;
  /** The plaintext it read from the server while intercepting. */
  seenFromServer(): string;
  /** The SPKI hash of its own key. */
  spkiSha256: string;
  /** Its certificate (PEM): trusted as a CA, it plays a load balancer with a publicly valid certificate. */
  certificate: string;
  close(): Promise<void>;
}

export async function startTlsMitm(target: { host: string; port: number }): Promise<TlsMitm> {
  const credentials = await makeSelfSignedCredentials(['localhost']);
  const context = createSecureContext({ key: credentials.key, cert: credentials.cert });
  const sockets = new Set<Socket>();
  const plaintext: Buffer[] = [];
  const fromServer: Buffer[] = [];
  let mode: TlsMitm['mode'] = 'intercept';

  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server: Server = createServer((client) => {
    track(client);
    if (mode === 'pass') {
      const upstream = netConnect(target.port, target.host);
      track(upstream);
      client.pipe(upstream).pipe(client);
      upstream.on('close', () => client.destroy());
      client.on('close', () => upstream.destroy());
      return;
    }
    const terminated = new TLSSocket(client, { isServer: true, secureContext: context });
    track(terminated);
    const upstream = tlsConnect({ host: target.host, port: target.port, servername: 'localhost', rejectUnauthorized: false });
    track(upstream);
    terminated.on('data', (chunk: Buffer) => {
      plaintext.push(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      fromServer.push(chunk);
      terminated.write(chunk);
    });
    upstream.on('close', () => terminated.destroy());
    terminated.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://localhost:${port}`,
    get mode() {
      return mode;
    },
    setMode(next) {
      mode = next;
      for (const socket of sockets) socket.destroy();
    },
    seen: () => Buffer.concat(plaintext).toString('latin1'),
    seenFromServer: () => Buffer.concat(fromServer).toString('latin1'),
    spkiSha256: credentials.spkiSha256,
    certificate: credentials.cert,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
