import { createHash, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A witness written from the C2SP tlog-witness, tlog-cosignature and signed-note texts alone, importing nothing of
 * Sigil's src/: what Sigil's witness push is tested against, so both sides are not the same code. Its state is in
 * memory; `trust` adds a log key (its name is the origin, as in `<name>+<id>+<base64 0x01||key>`).
 */
export interface SpecWitness {
  url: string;
  /** Its cosignature/v1 verifier key. */
  vkey: string;
  /** Latest cosigned size and root per origin. */
  state: Map<string, { size: number; root: Buffer }>;
  /** Every request status, in order. */
  statuses: number[];
  trust(logVkey: string): void;
  close(): Promise<void>;
}

const sha256 = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
const node = (l: Buffer, r: Buffer) => sha256(Buffer.from([1]), l, r);

/** RFC 9162 section 2.1.4.2, transcribed. */
function consistent(size1: number, size2: number, proof: Buffer[], root1: Buffer, root2: Buffer): boolean {
  if (size1 === size2) return proof.length === 0 && root1.equals(root2);
  if (size1 === 0 || size1 > size2 || proof.length === 0) return false;
  const path = (size1 & (size1 - 1)) === 0 ? [root1, ...proof] : proof;
  let fn = size1 - 1;
  let sn = size2 - 1;
  while (fn % 2 === 1) [fn, sn] = [Math.floor(fn / 2), Math.floor(sn / 2)];
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = node(c, fr);
      sr = node(c, sr);
      if (fn % 2 === 0) while (fn % 2 === 0 && fn !== 0) [fn, sn] = [Math.floor(fn / 2), Math.floor(sn / 2)];
    } else sr = node(sr, c);
    [fn, sn] = [Math.floor(fn / 2), Math.floor(sn / 2)];
  }
  return sn === 0 && fr.equals(root1) && sr.equals(root2);
}

const keyId = (name: string, type: number, raw: Buffer) => sha256(Buffer.from(`${name}\n`), Buffer.from([type]), raw).subarray(0, 4);

/** `hang`: never answers; `impostor`: signs with another key than the one its `vkey` names. */
export async function startSpecWitness(name: string, options: { hang?: boolean; impostor?: boolean } = {}): Promise<SpecWitness> {
  const own = generateKeyPairSync('ed25519');
  const publicKey = own.publicKey;
  const privateKey = options.impostor === true ? generateKeyPairSync('ed25519').privateKey : own.privateKey;
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
  const id = keyId(name, 4, raw);
  const logs = new Map<string, Array<{ id: Buffer; key: KeyObject }>>();
  const state = new Map<string, { size: number; root: Buffer }>();
  const statuses: number[] = [];

  function answer(body: string): { status: number; type?: string; text: string } {
    const blank = body.indexOf('\n\n');
    const head = body.slice(0, blank).split('\n');
    const old = /^old (0|[1-9][0-9]*)$/.exec(head[0] ?? '');
    if (blank < 0 || old === null || head.length - 1 > 63) return { status: 400, text: 'bad request\n' };
    const proof = head.slice(1).map((l) => Buffer.from(l, 'base64'));
    const note = body.slice(blank + 2);
    const split = note.lastIndexOf('\n\n');
    const text = note.slice(0, split + 1);
    const [origin, sizeLine, rootLine] = text.split('\n');
    const trusted = logs.get(origin!);
    if (trusted === undefined) return { status: 404, text: 'unknown origin\n' };
    const signed = note
      .slice(split + 2)
      .split('\n')
      .filter((l) => l.startsWith(`\u2014 ${origin} `))
      .map((l) => Buffer.from(l.split(' ')[2]!, 'base64'))
      .some((sig) => trusted.some((k) => sig.subarray(0, 4).equals(k.id) && verify(null, Buffer.from(text), k.key, sig.subarray(4))));
    if (!signed) return { status: 403, text: 'no trusted signature\n' };
    const size = Number(sizeLine);
    const root = Buffer.from(rootLine!, 'base64');
    const oldSize = Number(old[1]);
    if (oldSize > size) return { status: 400, text: 'old size above size\n' };
    const last = state.get(origin!);
    if (oldSize !== (last?.size ?? 0)) return { status: 409, type: 'text/x.tlog.size', text: `${last?.size ?? 0}\n` };
    if (last !== undefined && oldSize === size && !last.root.equals(root)) return { status: 409, type: 'text/x.tlog.size', text: `${last.size}\n` };
    if (oldSize > 0 && oldSize < size && !consistent(oldSize, size, proof, last!.root, root)) return { status: 422, text: 'inconsistent\n' };
    state.set(origin!, { size, root });
    const time = Math.floor(Date.now() / 1000);
    const stamp = Buffer.alloc(8);
    stamp.writeBigUInt64BE(BigInt(time));
    const signature = sign(null, Buffer.from(`cosignature/v1\ntime ${time}\n${text}`), privateKey);
    return { status: 200, text: `\u2014 ${name} ${Buffer.concat([id, stamp, signature]).toString('base64')}\n` };
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (options.hang === true) return;
      const a = req.method === 'POST' && req.url === '/add-checkpoint' ? answer(Buffer.concat(chunks).toString('utf8')) : { status: 404, text: 'no\n' };
      statuses.push(a.status);
      res.writeHead(a.status, { 'content-type': a.type ?? 'text/plain; charset=utf-8' }).end(a.text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    vkey: `${name}+${id.toString('hex')}+${Buffer.concat([Buffer.from([4]), raw]).toString('base64')}`,
    state,
    statuses,
    trust(logVkey) {
      const [, logName, idHex, material] = /^([^+]+)\+([0-9a-f]{8})\+(.+)$/.exec(logVkey) as unknown as [string, string, string, string];
      const bytes = Buffer.from(material, 'base64');
      const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: bytes.subarray(1).toString('base64url') }, format: 'jwk' });
      logs.set(logName, [...(logs.get(logName) ?? []), { id: Buffer.from(idHex, 'hex'), key }]);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
