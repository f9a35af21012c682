import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Attested, Exchange, ReceiptResult } from '../client/index.ts';
import type { Check } from '../verify/check.ts';
import type { ServiceExchange } from '../verify/exchange.ts';
import type { ServiceEvidence } from '../verify/verify-service.ts';
import { SigilError } from '../protocol/sigil-error.ts';

/**
 * `--audit-dir DIR` (docs/connect.md, "Audit"): every receipt connect verified, the exact bytes it covers and the
 * evidence it was held to, so that `sigil verify --audit DIR` checks them again offline with the same core.
 *
 *   DIR/evidence/<sha256>.json   one attestation: its nonce, what was fetched, when
 *   DIR/receipts/<time>-<n>.json  one exchange: path, nonce, request and response bytes (base64), the receipt, connect's verdict
 *
 * Files are written before the app gets the answer, readable by their owner only: they hold the app's prompts and answers.
 * Receipt log inclusion (the transparency log) is not kept yet: a record gains a `checkpoint` field once it exists.
 */
const FILE_MODE = 0o600;

interface EvidenceFile {
  service: string;
  at: string;
  nonce: string;
  evidence: {
    attestation: unknown;
    signedNonce?: string;
    jwks: { keys: unknown[] };
    policy: unknown;
    startAttestation?: unknown;
    servedHpkeKeyConfig?: { base64: string } | { error: string };
    servedOhttpKeys?: { base64: string } | { error: string } | 'not served';
    connection?: { url: string; presentedTlsKeys: readonly string[] | 'not visible' };
  };
}

interface ReceiptFile {
  at: string;
  evidence: string;
  ok: boolean;
  checks: Check[];
  exchange: { path: string; stream: boolean; nonce: string; request: string; response: string; receipt?: string };
}

function evidenceFile(service: string, attested: Attested): EvidenceFile {
  const e = attested.evidence;
  const out: EvidenceFile = {
    service,
    at: attested.at.toISOString(),
    nonce: Buffer.from(attested.nonce).toString('hex'),
    evidence: { attestation: e.attestation, jwks: e.jwks, policy: e.policy },
  };
  if (e.signedNonce !== undefined) out.evidence.signedNonce = e.signedNonce;
  if (e.startAttestation !== undefined) out.evidence.startAttestation = e.startAttestation;
  if (e.servedHpkeKeyConfig !== undefined)
    out.evidence.servedHpkeKeyConfig =
      e.servedHpkeKeyConfig instanceof Uint8Array
        ? { base64: Buffer.from(e.servedHpkeKeyConfig).toString('base64') }
        : { error: e.servedHpkeKeyConfig.message };
  if (e.servedOhttpKeys !== undefined)
    out.evidence.servedOhttpKeys =
      e.servedOhttpKeys === 'not served'
        ? 'not served'
        : e.servedOhttpKeys instanceof Uint8Array
          ? { base64: Buffer.from(e.servedOhttpKeys).toString('base64') }
          : { error: e.servedOhttpKeys.message };
  if (e.connection !== undefined) out.evidence.connection = { url: e.connection.url.href, presentedTlsKeys: e.connection.presentedTlsKeys };
  return out;
}

/** Keeps each exchange connect verified, and each attestation once. */
export class AuditDirectory {
  private count = 0;
  private readonly written = new WeakMap<Attested, string>();

  constructor(
    readonly dir: string,
    private readonly service: string,
  ) {
    mkdirSync(join(dir, 'evidence'), { recursive: true, mode: 0o700 });
    mkdirSync(join(dir, 'receipts'), { recursive: true, mode: 0o700 });
  }

  private evidenceName(attested: Attested): string {
    const known = this.written.get(attested);
    if (known !== undefined) return known;
    const text = JSON.stringify(evidenceFile(this.service, attested), null, 2);
    const name = createHash('sha256').update(text).digest('hex');
    writeFileSync(join(this.dir, 'evidence', `${name}.json`), text, { mode: FILE_MODE });
    this.written.set(attested, name);
    return name;
  }

  keep(exchange: Exchange, result: ReceiptResult, attested: Attested): void {
    const at = new Date();
    const record: ReceiptFile = {
      at: at.toISOString(),
      evidence: this.evidenceName(attested),
      ok: result.ok,
      checks: result.checks,
      exchange: {
        path: exchange.path,
        stream: exchange.stream,
        nonce: exchange.nonce,
        request: Buffer.from(exchange.requestBytes).toString('base64'),
        response: Buffer.from(exchange.responseBytes).toString('base64'),
      },
    };
    if (!exchange.stream && exchange.receiptHeader !== null) record.exchange.receipt = exchange.receiptHeader;
    const name = `${at.toISOString().replace(/[:.]/g, '-')}-${String(++this.count).padStart(6, '0')}.json`;
    writeFileSync(join(this.dir, 'receipts', name), JSON.stringify(record, null, 2), { mode: FILE_MODE });
  }
}

/** One attestation as kept, with the exchanges held to it, ready for the core again. */
export interface AuditedAttestation {
  file: string;
  service: string;
  at: Date;
  nonce: Uint8Array;
  evidence: ServiceEvidence;
  /** Each kept exchange, with connect's verdict at the time. */
  receipts: Array<{ file: string; at: Date; okThen: boolean; exchange: ServiceExchange }>;
}

function restoreEvidence(kept: EvidenceFile['evidence']): ServiceEvidence {
  const evidence: ServiceEvidence = { attestation: kept.attestation, jwks: kept.jwks, policy: kept.policy };
  if (kept.signedNonce !== undefined) evidence.signedNonce = kept.signedNonce;
  if (kept.startAttestation !== undefined) evidence.startAttestation = kept.startAttestation;
  if (kept.servedHpkeKeyConfig !== undefined)
    evidence.servedHpkeKeyConfig =
      'base64' in kept.servedHpkeKeyConfig ? new Uint8Array(Buffer.from(kept.servedHpkeKeyConfig.base64, 'base64')) : new Error(kept.servedHpkeKeyConfig.error);
  const ohttp = kept.servedOhttpKeys;
  if (ohttp !== undefined)
    evidence.servedOhttpKeys =
      ohttp === 'not served' ? ohttp : 'base64' in ohttp ? new Uint8Array(Buffer.from(ohttp.base64, 'base64')) : new Error(ohttp.error);
  if (kept.connection !== undefined) evidence.connection = { url: new URL(kept.connection.url), presentedTlsKeys: kept.connection.presentedTlsKeys };
  return evidence;
}

/** An audit directory that does not hold together: a receipt names evidence the directory lacks. */
export class AuditDirectoryError extends SigilError<'ERR_AUDIT_DIRECTORY'> {
  constructor(message: string) {
    super('ERR_AUDIT_DIRECTORY', message);
  }
}

/** Reads an audit directory back: each attestation with the receipts verified against it (files in name order). */
export function readAuditDirectory(dir: string): AuditedAttestation[] {
  const byName = new Map<string, AuditedAttestation>();
  for (const file of readdirSync(join(dir, 'evidence'))
    .filter((f) => f.endsWith('.json'))
    .sort()) {
    const kept = JSON.parse(readFileSync(join(dir, 'evidence', file), 'utf8')) as EvidenceFile;
    byName.set(file.slice(0, -'.json'.length), {
      file: join('evidence', file),
      service: kept.service,
      at: new Date(kept.at),
      nonce: new Uint8Array(Buffer.from(kept.nonce, 'hex')),
      evidence: restoreEvidence(kept.evidence),
      receipts: [],
    });
  }
  for (const file of readdirSync(join(dir, 'receipts'))
    .filter((f) => f.endsWith('.json'))
    .sort()) {
    const kept = JSON.parse(readFileSync(join(dir, 'receipts', file), 'utf8')) as ReceiptFile;
    const attestation = byName.get(kept.evidence);
    if (attestation === undefined) throw new AuditDirectoryError(`receipts/${file} names evidence ${kept.evidence}, which the directory does not hold`);
    const exchange: ServiceExchange = {
      path: kept.exchange.path,
      stream: kept.exchange.stream,
      nonce: kept.exchange.nonce,
      request: new Uint8Array(Buffer.from(kept.exchange.request, 'base64')),
      response: new Uint8Array(Buffer.from(kept.exchange.response, 'base64')),
    };
    if (kept.exchange.receipt !== undefined) exchange.receipt = kept.exchange.receipt;
    attestation.receipts.push({ file: join('receipts', file), at: new Date(kept.at), okThen: kept.ok, exchange });
  }
  return [...byName.values()];
}
