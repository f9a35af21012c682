import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BaseModeSchedule } from '../../src/ehbp/base-recipient.ts';
import { makeEhbpServerKey } from '../../src/ehbp/server-key.ts';
import { ehbpSuite, REQUEST_INFO } from '../../src/ehbp/suite.ts';

/** RFC 9180 Appendix A.1 (test/vectors/README.md): DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM. */
interface Vector {
  mode: number;
  info: string;
  skRm: string;
  enc: string;
  encryptions: { sequence_number: number; pt: string; aad: string; ct: string }[];
  exports: { exporter_context: string; L: number; exported_value: string }[];
}

const vectors = JSON.parse(readFileSync(join(import.meta.dirname, '../vectors/rfc9180/x25519-sha256-aes128gcm.json'), 'utf8')) as Vector[];
const base = vectors.find((v) => v.mode === 0)!;
const hex = (s: string) => Buffer.from(s, 'hex');
const x25519Key = (raw: Uint8Array) => createPrivateKey({ key: Buffer.concat([hex('302e020100300506032b656e04220420'), raw]), format: 'der', type: 'pkcs8' });

describe('the HPKE base-mode recipient on node:crypto', () => {
  it('opens RFC 9180 A.1 base mode encryptions in order and exports every listed value', () => {
    const recipient = new BaseModeSchedule({ aead: 'aes-128-gcm' }, hex(base.info)).setup(x25519Key(hex(base.skRm)), hex(base.enc));
    const consecutive = base.encryptions.filter((e, i) => e.sequence_number === i);
    expect(consecutive.map((e) => e.sequence_number)).toEqual([0, 1, 2]);
    for (const e of consecutive) expect(recipient.open(hex(e.ct), hex(e.aad)).toString('hex')).toBe(e.pt);
    for (const x of base.exports) expect(Buffer.from(recipient.export(hex(x.exporter_context), x.L)).toString('hex')).toBe(x.exported_value);
  });

  it('refuses a changed ciphertext, then still opens the next genuine one (the sequence moves only on success)', () => {
    const recipient = new BaseModeSchedule({ aead: 'aes-128-gcm' }, hex(base.info)).setup(x25519Key(hex(base.skRm)), hex(base.enc));
    const first = hex(base.encryptions[0]!.ct);
    first[3]! ^= 1;
    expect(() => recipient.open(first, hex(base.encryptions[0]!.aad))).toThrow();
    expect(recipient.open(hex(base.encryptions[0]!.ct), hex(base.encryptions[0]!.aad)).toString('hex')).toBe(base.encryptions[0]!.pt);
  });

  it("agrees with @hpke/core's sender on EHBP's suite (AES-256-GCM): opens its frames and exports the same secrets", async () => {
    const key = await makeEhbpServerKey();
    const sender = await ehbpSuite().createSenderContext({ recipientPublicKey: key.keyPair.publicKey, info: REQUEST_INFO });
    const recipient = new BaseModeSchedule({ aead: 'aes-256-gcm' }, REQUEST_INFO).setup(key.privateKey, new Uint8Array(sender.enc));
    for (const text of ['{"model":"m"}', '', 'a second frame']) {
      expect(recipient.open(new Uint8Array(await sender.seal(Buffer.from(text)))).toString()).toBe(text);
    }
    const label = Buffer.from('ehbp response');
    expect(Buffer.from(recipient.export(label, 32))).toEqual(Buffer.from(await sender.export(label, 32)));
  });

  it('refuses an encapsulated key that is a low-order point (an all-zero shared secret)', async () => {
    const key = await makeEhbpServerKey();
    const schedule = new BaseModeSchedule({ aead: 'aes-256-gcm' }, REQUEST_INFO);
    for (const enc of [new Uint8Array(32), Uint8Array.of(1, ...new Uint8Array(31))]) expect(() => schedule.setup(key.privateKey, enc)).toThrow();
  });
});
