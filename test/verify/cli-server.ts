import { createHash, randomUUID } from 'node:crypto';
import { createServer, type RequestListener } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { makeSelfSignedCredentials } from '../../src/tls/self-signed.ts';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import canonicalizeModule from 'canonicalize';
import { gpuEvidenceSha256, reportDataV2, type AttestationBinding, type GpuEvidence } from '../../src/protocol/attestation.ts';
import type { ReceiptClaims } from '../../src/verify/claims.ts';
import { SIGNED_NONCE_TYP } from '../../src/protocol/signed-nonce.ts';
import { amdCertTable, buildSnpReport, type AmdTestChain } from '../support/evidence-fixtures.ts';
import type { TestSigner } from './receipt-fixtures.ts';

const canonicalize = canonicalizeModule as unknown as (input: unknown) => string;
const sha256 = (bytes: Uint8Array | string) => 'sha256:' + createHash('sha256').update(bytes).digest('hex');

export const TEST_API_KEY = 'sk-test-0123456789abcdef-secret';
export const NONE_MEASUREMENT = '0'.repeat(96);
export const POLICY = {
  schema_version: '1.0.0',
  models: [{ id: 'm1', provider: 'acme', model_hash: 'sha256:' + '1'.repeat(64), upstream_model: 'm1', upstreams: [] }],
  attestation: { provider: 'none' },
};

/** Hardware evidence for a fake TEE: the document's `evidence` object for the given 64-byte report data. */
export interface FakeHardware {
  tee: 'sev-snp' | 'tdx';
  /** What the document and the receipts claim (lowercase hex). */
  measurement: string;
  evidence(reportData: Uint8Array): { report: string; certificates: string } | { quote: string };
}

/** The stand-in's SEV-SNP hardware: reports of a Milan CPU measuring `measurement`, signed by `chain`'s VCEK. */
export function milanSnpHardware(chain: AmdTestChain, measurement: Uint8Array): FakeHardware {
  const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
  return {
    tee: 'sev-snp',
    measurement: Buffer.from(measurement).toString('hex'),
    evidence: (reportData) => ({
      report: b64(buildSnpReport({ reportData, measurement, cpuid: { family: 0x19, model: 0x01 } }, chain.vcekKey)),
      certificates: b64(amdCertTable(chain)),
    }),
  };
}

/** How the fake service misbehaves, per test. */
export interface Faults {
  /** Flip one response body byte after the receipt hashed it. */
  tamperResponse?: boolean;
  /** Answer the attestation request with a nonce other than the one asked for. */
  staleAttestation?: boolean;
  /** With `proof=signature`, send start evidence binding another JWKS than the one served (as a grown fleet's replica does). */
  startBindsOtherJwks?: TestSigner;
  /** Sign the nonce asked with `proof=signature` under a key the start evidence does not bind. */
  foreignNonceKey?: TestSigner;
  /** Leave the receipt comment off the stream (the client must use GET /v1/receipts/{id}). */
  omitStreamReceipt?: boolean;
  /** Keep no message receipt for GET /v1/receipts/{id}. */
  forgetReceipts?: boolean;
}

export interface FakeService {
  url: string;
  faults: Faults;
  /** GPU evidence the fresh documents carry (default none), its hashes bound unless `gpuBound` says otherwise. */
  gpu?: GpuEvidence[];
  gpuBound?: string[];
  /** Every nonce a fresh attestation was asked for, oldest first. */
  attestationNonces: string[];
  /** Every nonce a signed nonce was asked for, oldest first. */
  signedNonces: string[];
  /** The last exchange, as the server saw it. */
  last?: { requestBytes: Buffer; responseBytes: Buffer; receipt: string };
  close(): Promise<void>;
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const START_NONCE_HEX = '00'.repeat(32);
const SERVICE_MANIFEST = '5e'.repeat(48);
/** The stand-in's one runtime event: it started with this manifest and its policy, as Sigil records at start. */
export const SERVICE_START_EVENT = (() => {
  const payload = JSON.stringify({
    at: '2026-01-01T00:00:00.000Z',
    kind: 'sigil-event/2',
    manifest_sha384: SERVICE_MANIFEST,
    policy_hash: sha256(canonicalize(POLICY)),
    reason: 'start',
    seq: 0,
  });
  return { imr: 3, event: 'sigil', digest: createHash('sha384').update(payload).digest('hex'), payload };
})();
/** RTMR0-3 of a TDX stand-in whose RTMR3 holds SERVICE_START_EVENT. */
export const SERVICE_RTMRS = [
  Buffer.alloc(48),
  Buffer.alloc(48),
  Buffer.alloc(48),
  createHash('sha384').update(Buffer.alloc(48)).update(Buffer.from(SERVICE_START_EVENT.digest, 'hex')).digest(),
];
const SERVICE_EVENT_LOG = { ccel_table: null, ccel_data: null, runtime_events: [SERVICE_START_EVENT], self_measurement: { extended: true, reason: null } };
const bindingFor = (jwks: { keys: object[] }, tlsSpki: string | null, gpuSha256: string[] = []): AttestationBinding => ({
  jwks: jwks as AttestationBinding['jwks'],
  policy_hash: sha256(canonicalize(POLICY)),
  tls_spki_sha256: tlsSpki,
  hpke_key_config: null,
  gpu_evidence_sha256: gpuSha256,
  manifest_sha384: SERVICE_MANIFEST,
  key_origin: { receipt: { origin: 'generated' }, tls: tlsSpki === null ? null : { origin: 'generated' }, hpke: null },
  runtime_events_sha384: [SERVICE_START_EVENT.digest],
});
const reportDataFor = (nonceHex: string, jwks: { keys: object[] }, tlsSpki: string | null, gpuSha256: string[] = []) =>
  Buffer.from(reportDataV2(Buffer.from(nonceHex, 'hex'), bindingFor(jwks, tlsSpki, gpuSha256)));
/** The document's single `evidence` string: the SNP report followed by its certificate table, or the TDX quote. */
const evidenceString = (e: ReturnType<FakeHardware['evidence']>) =>
  'report' in e ? Buffer.concat([Buffer.from(e.report, 'base64'), Buffer.from(e.certificates, 'base64')]).toString('base64') : e.quote;

/**
 * A stand-in Sigil, tee "none" over plain HTTP unless given hardware, then over TLS with its key bound as
 * Sigil binds it: the verify endpoints and a chat endpoint that signs receipts with `signer`.
 */
export async function startFakeService(signer: TestSigner, hardware?: FakeHardware): Promise<FakeService> {
  const jwks = { keys: [signer.publicJwk] };
  const measurement = hardware?.measurement ?? NONE_MEASUREMENT;
  const tls = hardware === undefined ? undefined : await makeSelfSignedCredentials(['localhost']);
  const tlsSpki = tls?.spkiSha256 ?? null;
  const startHardware = hardware?.evidence(reportDataFor(START_NONCE_HEX, jwks, tlsSpki));
  const startEvidence = startHardware === undefined ? undefined : evidenceString(startHardware);
  const startBytes = startEvidence === undefined ? undefined : Buffer.from(startEvidence, 'base64');
  const stored = new Map<string, string>();
  const claimsFor = (type: 'model' | 'message', receiptId: string, nonce: string): ReceiptClaims => {
    const now = new Date();
    return {
      schema_version: '1.0.0',
      receipt_type: type,
      receipt_id: receiptId,
      enclave_measurement: measurement,
      tee: hardware?.tee ?? 'none',
      ...(startBytes === undefined ? {} : { attestation_hash: sha256(startBytes) }),
      policy_hash: sha256(canonicalize(POLICY)),
      selected_model: { provider: 'acme', model_id: 'm1', model_hash: POLICY.models[0]!.model_hash },
      nonce,
      issued_at: now.toISOString().replace(/\.\d{3}Z$/, 'Z'),
      iat: Math.floor(now.getTime() / 1000),
    };
  };

  const service: FakeService = { url: '', faults: {}, attestationNonces: [], signedNonces: [], close: async () => undefined };
  const server: Server = (tls === undefined ? createServer : (handler: RequestListener) => createTlsServer({ key: tls.key, cert: tls.cert }, handler))(
    async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const json = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      if (req.method === 'GET' && url.pathname === '/v1/verify/jwks.json') return json(200, jwks);
      if (req.method === 'GET' && url.pathname === '/v1/verify/policy') return json(200, POLICY);
      if (req.method === 'GET' && url.pathname === '/v1/models') return json(200, { object: 'list', data: [{ id: 'm1', object: 'model' }] });
      if (req.method === 'GET' && url.pathname === '/v1/verify/attestation') {
        const asked = url.searchParams.get('nonce') ?? '';
        if (url.searchParams.get('proof') === 'signature') {
          // As Sigil answers: the start evidence, and the nonce signed by the receipt key it binds (or, stale, another nonce).
          service.signedNonces.push(asked);
          const bound = service.faults.startBindsOtherJwks === undefined ? jwks : { keys: [signer.publicJwk, service.faults.startBindsOtherJwks.publicJwk] };
          const start = {
            version: 2,
            tee: hardware?.tee ?? 'none',
            measurement,
            nonce: START_NONCE_HEX,
            binding: bindingFor(bound, tlsSpki),
            report_data: reportDataFor(START_NONCE_HEX, bound, tlsSpki).toString('hex'),
            evidence: startEvidence ?? null,
            event_log: hardware === undefined ? null : SERVICE_EVENT_LOG,
            gpu_evidence: [],
          };
          const claims = {
            nonce: service.faults.staleAttestation ? 'ee'.repeat(32) : asked,
            start_document_sha256: sha256(canonicalize(start)),
            iat: Math.floor(Date.now() / 1000),
          };
          return json(200, {
            attestation: start,
            signed_nonce: (service.faults.foreignNonceKey ?? signer).sign(claims, { alg: 'ES256', typ: SIGNED_NONCE_TYP, kid: signer.kid }),
          });
        }
        const nonceHex = service.faults.staleAttestation ? 'ee'.repeat(32) : asked === '' ? START_NONCE_HEX : asked;
        if (asked !== '') service.attestationNonces.push(asked);
        const gpu = asked === '' ? [] : (service.gpu ?? []);
        const gpuSha256 = asked === '' ? [] : (service.gpuBound ?? gpu.map(gpuEvidenceSha256));
        const reportData = reportDataFor(nonceHex, jwks, tlsSpki, gpuSha256);
        const fresh = hardware?.evidence(reportData);
        const evidence = asked === '' ? (startEvidence ?? null) : fresh === undefined ? null : evidenceString(fresh);
        const binding = bindingFor(jwks, tlsSpki, gpuSha256);
        return json(200, {
          version: 2,
          tee: hardware?.tee ?? 'none',
          measurement,
          nonce: nonceHex,
          binding,
          report_data: reportData.toString('hex'),
          evidence,
          event_log: hardware === undefined ? null : SERVICE_EVENT_LOG,
          gpu_evidence: gpu,
        });
      }
      if (req.method === 'GET' && url.pathname.startsWith('/v1/receipts/')) {
        const id = decodeURIComponent(url.pathname.slice('/v1/receipts/'.length));
        const receipt = stored.get(id);
        return receipt === undefined ? json(404, { error: { message: 'no such receipt' } }) : json(200, { id, receipt });
      }
      if (req.method === 'POST' && url.pathname === '/v1/chat/completions') {
        if (req.headers.authorization !== `Bearer ${TEST_API_KEY}`) return json(401, { error: { message: 'Invalid API key.', type: 'authentication_error' } });
        const requestBytes = await body(req);
        const chat = JSON.parse(requestBytes.toString()) as { stream?: boolean };
        const nonce = String(req.headers['x-service-nonce'] ?? '');
        const receiptId = randomUUID();
        const flip = (bytes: Buffer) => {
          if (!service.faults.tamperResponse) return bytes;
          const copy = Buffer.from(bytes);
          const at = copy.indexOf('Hello');
          copy[at] = 0x4a; // 'H' -> 'J'
          return copy;
        };
        const message = (responseBytes: Buffer, completionId: string) =>
          signer.sign({
            ...claimsFor('message', receiptId, nonce),
            completion_id: completionId,
            request_hash: sha256(requestBytes),
            response_hash: sha256(responseBytes),
          });
        if (chat.stream) {
          const events = [
            {
              id: 'chatcmpl-7',
              object: 'chat.completion.chunk',
              model: 'm1',
              choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello' }, finish_reason: null }],
            },
            { id: 'chatcmpl-7', object: 'chat.completion.chunk', model: 'm1', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
          ];
          const streamed = Buffer.from(events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n');
          const receipt = message(streamed, 'chatcmpl-7');
          if (!service.faults.forgetReceipts) stored.set(receiptId, receipt);
          res.writeHead(200, {
            'content-type': 'text/event-stream',
            'x-service-receipt': signer.sign(claimsFor('model', receiptId, nonce)),
            'x-service-receipt-id': receiptId,
          });
          const sent = flip(streamed);
          res.write(sent.subarray(0, 40));
          res.write(sent.subarray(40));
          res.end(service.faults.omitStreamReceipt ? undefined : `: receipt ${receipt}\n\n`);
          service.last = { requestBytes, responseBytes: streamed, receipt };
          return;
        }
        const responseBytes = Buffer.from(
          JSON.stringify({
            id: 'chatcmpl-6',
            object: 'chat.completion',
            model: 'm1',
            choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there.' }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
          }),
        );
        const receipt = message(responseBytes, 'chatcmpl-6');
        const sent = flip(responseBytes);
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-length': sent.length,
          'x-service-receipt': receipt,
          'x-service-receipt-id': receiptId,
        });
        res.end(sent);
        service.last = { requestBytes, responseBytes, receipt };
        return;
      }
      json(404, { error: { message: 'not found' } });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  service.url = `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  service.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return service;
}
