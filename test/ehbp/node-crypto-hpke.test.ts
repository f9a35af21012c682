import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CipherSuite, type RecipientContext } from '@hpke/core';
import { describe, expect, it } from 'vitest';
import { AesGcmNode, DhkemX25519HkdfSha256Node, HkdfSha256Node } from '../../src/ehbp/node-crypto-hpke.ts';
import { ehbpServerKeyFrom, exportEhbpPrivateKey, makeEhbpServerKey } from '../../src/ehbp/server-key.ts';
import { ehbpSuite, REQUEST_INFO } from '../../src/ehbp/suite.ts';

/** RFC 9180 Appendix A.1 (test/vectors/README.md): DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, all four modes. */
interface Vector {
  mode: number;
  info: string;
  ikmE: string;
  ikmR: string;
  ikmS?: string;
  skRm: string;
  pkRm: string;
  pkSm?: string;
  enc: string;
  psk?: string;
  psk_id?: string;
  shared_secret: string;
  encryptions: { sequence_number: number; pt: string; aad: string; ct: string }[];
  exports: { exporter_context: string; L: number; exported_value: string }[];
}

const vectors = JSON.parse(readFileSync(join(import.meta.dirname, '../vectors/rfc9180/x25519-sha256-aes128gcm.json'), 'utf8')) as Vector[];
const hex = (s: string) => Buffer.from(s, 'hex');
const toHex = (b: ArrayBuffer | Uint8Array) => Buffer.from(b instanceof ArrayBuffer ? new Uint8Array(b) : b).toString('hex');
const MODES = ['base', 'psk', 'auth', 'auth-psk'];

const suite = () => new CipherSuite({ kem: new DhkemX25519HkdfSha256Node(), kdf: new HkdfSha256Node(), aead: new AesGcmNode(16) });

describe('HPKE on node:crypto against RFC 9180 Appendix A.1', () => {
  for (const v of vectors) {
    const psk = v.psk === undefined ? {} : { psk: { key: hex(v.psk), id: hex(v.psk_id!) } };

    it(`${MODES[v.mode]} mode: DeriveKeyPair gives skRm and pkRm; the recipient opens the encryptions in order and exports every value`, async () => {
      const s = suite();
      const recipient = await s.kem.deriveKeyPair(hex(v.ikmR));
      expect(toHex(await s.kem.serializePrivateKey(recipient.privateKey))).toBe(v.skRm);
      expect(toHex(await s.kem.serializePublicKey(recipient.publicKey))).toBe(v.pkRm);
      const sender = v.ikmS === undefined ? {} : { senderPublicKey: (await s.kem.deriveKeyPair(hex(v.ikmS))).publicKey };
      const context: RecipientContext = await s.createRecipientContext({ recipientKey: recipient, enc: hex(v.enc), info: hex(v.info), ...psk, ...sender });
      // A recipient opens in sequence: the vector's first encryptions are numbers 0, 1 and 2.
      const consecutive = v.encryptions.filter((e, i) => e.sequence_number === i);
      expect(consecutive.map((e) => e.sequence_number)).toEqual([0, 1, 2]);
      for (const e of consecutive) expect(toHex(await context.open(hex(e.ct), hex(e.aad)))).toBe(e.pt);
      for (const x of v.exports) expect(toHex(await context.export(hex(x.exporter_context), x.L))).toBe(x.exported_value);
    });

    it(`${MODES[v.mode]} mode: Decap gives the vector's shared_secret (base and psk: OpenSSL's own DHKEM)`, async () => {
      const s = suite();
      const recipient = await s.kem.deriveKeyPair(hex(v.ikmR));
      const sender = v.ikmS === undefined ? {} : { senderPublicKey: (await s.kem.deriveKeyPair(hex(v.ikmS))).publicKey };
      expect(toHex(await s.kem.decap({ recipientKey: recipient, enc: hex(v.enc), ...sender }))).toBe(v.shared_secret);
    });

    it(`${MODES[v.mode]} mode: a sender with the vector's ephemeral key makes enc and every listed ciphertext, up to number 256`, async () => {
      const s = suite();
      const recipient = await s.kem.deriveKeyPair(hex(v.ikmR));
      const sender = v.ikmS === undefined ? {} : { senderKey: await s.kem.deriveKeyPair(hex(v.ikmS)) };
      const context = await s.createSenderContext({ recipientPublicKey: recipient.publicKey, ekm: hex(v.ikmE), info: hex(v.info), ...psk, ...sender });
      expect(toHex(context.enc)).toBe(v.enc);
      const wanted = new Map(v.encryptions.map((e) => [e.sequence_number, e]));
      const last = Math.max(...wanted.keys());
      for (let seq = 0; seq <= last; seq++) {
        const e = wanted.get(seq) ?? v.encryptions[0]!;
        const ct = toHex(await context.seal(hex(e.pt), hex(e.aad)));
        if (wanted.has(seq)) expect(ct).toBe(e.ct);
      }
    });
  }
});

describe("EHBP's suite (AES-256-GCM) on node:crypto", () => {
  it('opens what a sender of the same suite sealed, and refuses a changed frame', async () => {
    const key = await makeEhbpServerKey();
    const s = ehbpSuite();
    const sender = await s.createSenderContext({ recipientPublicKey: key.keyPair.publicKey, info: REQUEST_INFO });
    const recipient = await s.createRecipientContext({ recipientKey: key.keyPair, enc: sender.enc, info: REQUEST_INFO });
    const first = new Uint8Array(await sender.seal(Buffer.from('{"model":"m"}')));
    const second = new Uint8Array(await sender.seal(Buffer.from('second')));
    expect(Buffer.from(await recipient.open(first)).toString()).toBe('{"model":"m"}');
    second[0]! ^= 1;
    await expect(recipient.open(second)).rejects.toThrow();
  });

  it('refuses an encapsulated key that is a low-order point (an all-zero shared secret)', async () => {
    const key = await makeEhbpServerKey();
    for (const enc of [new Uint8Array(32), Uint8Array.of(1, ...new Uint8Array(31))]) {
      await expect(key.suite.createRecipientContext({ recipientKey: key.keyPair, enc, info: REQUEST_INFO })).rejects.toThrow();
    }
  });

  it('derives the same key from the same sealed material, and a worker rebuilds it from the exported private half', async () => {
    const ikm = hex('6db9df30aa07dd42ee5e8181afdb977e538f5e1fec8a06223f33f7013e525037');
    const primary = await makeEhbpServerKey(ikm, true);
    expect(toHex((await makeEhbpServerKey(ikm)).keyConfig)).toBe(toHex(primary.keyConfig));
    // RFC 9180 A.1's ikmR: the key config carries that vector's pkRm.
    expect(toHex(primary.keyConfig.subarray(3, 35))).toBe(vectors[0]!.pkRm);
    const exported = await exportEhbpPrivateKey(primary);
    expect(toHex(exported)).toBe(vectors[0]!.skRm);
    const worker = await ehbpServerKeyFrom(exported, primary.keyConfig);
    const sender = await primary.suite.createSenderContext({ recipientPublicKey: primary.keyPair.publicKey, info: REQUEST_INFO });
    const opened = await worker.suite.createRecipientContext({ recipientKey: worker.keyPair, enc: sender.enc, info: REQUEST_INFO });
    expect(Buffer.from(await opened.open(await sender.seal(Buffer.from('hi')))).toString()).toBe('hi');
  });

  it('exports the private half only of a key made exportable', async () => {
    await expect(exportEhbpPrivateKey(await makeEhbpServerKey())).rejects.toThrow(/not made exportable/);
  });
});
