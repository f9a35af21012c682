import { createPrivateKey, createPublicKey, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { COSIGNATURE_V1, cosignedMessage, formatVerifierKey, noteKeyId } from '../protocol/tlog/note.ts';

/** A witness's Ed25519 key (`sigil witness keygen`) and what it signs: C2SP tlog-cosignature `cosignature/v1` lines. */
export interface WitnessKey {
  name: string;
  keyId: number;
  /** The cosignature/v1 verifier key (type 4) a log or verifier configures. */
  vkey: string;
  /** `— <name> base64(key ID || timestamp || signature)` over the checkpoint text at `timestamp` (seconds). */
  cosign(text: string, timestamp: number): string;
}

export function readWitnessKey(file: string): WitnessKey {
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as { name: string; private_key_pem: string };
  const privateKey = createPrivateKey(parsed.private_key_pem);
  const raw = Buffer.from(createPublicKey(privateKey).export({ format: 'jwk' }).x!, 'base64url');
  const keyId = noteKeyId(parsed.name, COSIGNATURE_V1, raw);
  return {
    name: parsed.name,
    keyId,
    vkey: formatVerifierKey({ name: parsed.name, keyId, type: COSIGNATURE_V1, publicKey: raw }),
    cosign(text, timestamp) {
      const head = Buffer.alloc(12);
      head.writeUInt32BE(keyId, 0);
      head.writeBigUInt64BE(BigInt(timestamp), 4);
      const signature = sign(null, cosignedMessage(text, timestamp), privateKey);
      return `\u2014 ${parsed.name} ${Buffer.concat([head, signature]).toString('base64')}\n`;
    },
  };
}
