import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BlockList } from 'node:net';
import { makeAttestationDocument } from '../../attestation/document.ts';
import type { AppContext } from '../context.ts';
import type { RequestTarget } from '../request-target.ts';
import { HttpError, httpError } from '../../protocol/errors.ts';
import { sendJson } from '../respond.ts';
import { PerClientBuckets } from '../../limits/per-client-bucket.ts';
import { clientAddress } from '../client-address.ts';

const NONCE_HEX = /^[0-9a-fA-F]{64}$/;
const CACHE_SIZE = 256;
const TRACKED_CLIENTS = 10_000;

/** GET /v1/verify/jwks.json */
export function handleJwks(_req: IncomingMessage, res: ServerResponse, ctx: AppContext): void {
  sendJson(res, 200, ctx.documents.jwks, { 'cache-control': 'no-cache' });
}

/** GET /v1/verify/policy */
export function handlePolicy(_req: IncomingMessage, res: ServerResponse, ctx: AppContext): void {
  sendJson(res, 200, ctx.documents.policy, { 'cache-control': 'no-cache' });
}

/**
 * Whose allowance a fresh attestation spends: the API key's when a valid one is sent (the attested client sends it),
 * else the caller's address (behind a trusted proxy, the one X-Forwarded-For names: docs/configuration.md).
 */
function clientOf(req: IncomingMessage, ctx: AppContext, trusted: BlockList | undefined): string {
  if (req.headers.authorization !== undefined) {
    try {
      return `key:${ctx.keyRing.authenticate(req.headers).keyHash}`;
    } catch {
      // An invalid key is an anonymous caller.
    }
  }
  return `addr:${clientAddress(req, trusted)}`;
}

interface Allowance {
  burst: number;
  perS: number;
}

/**
 * GET /v1/verify/attestation[?nonce=HEX[&proof=signature]]: without a nonce, the evidence made at start
 * (the one `attestation_hash` names); with a 32-byte hex nonce, fresh evidence binding it; with
 * `proof=signature` as well, the start evidence and the nonce signed by the receipt key it binds
 * (docs/attestation.md, "Freshness from a signed nonce"). Fresh evidence is cached per nonce and
 * rate-limited per client (docs/api.md), because hardware reports are slow and shared: one client's
 * flood spends its own allowance, never another's. A signed nonce costs one ES256 signature and has its
 * own, generous allowance, so that clients sharing an address (behind a load balancer) still attest; a client that
 * sends its API key spends its key's allowance, and anonymous callers behind one untrusted proxy share one.
 */
export function createAttestationHandler(limits: { fresh: Allowance; signed: Allowance; trustedProxies?: BlockList | undefined }) {
  const cache = new Map<string, Promise<string>>();
  const buckets = new PerClientBuckets({ ...limits.fresh, maxClients: TRACKED_CLIENTS });
  const signedBuckets = new PerClientBuckets({ ...limits.signed, maxClients: TRACKED_CLIENTS });

  return async function handleAttestation(req: IncomingMessage, res: ServerResponse, ctx: AppContext, url: RequestTarget): Promise<void> {
    const nonceHex = url.searchParams.get('nonce');
    const proof = url.searchParams.get('proof');
    if (proof !== null && proof !== 'signature' && proof !== 'report')
      throw httpError('invalid_value', '\'proof\' must be "report" (a fresh hardware report) or "signature" (the start evidence and a signed nonce).', 'proof');
    if (nonceHex === null || nonceHex === '') {
      if (proof === 'signature') throw httpError('missing_required_parameter', "'proof=signature' needs a 'nonce' to sign.", 'nonce');
      sendJson(res, 200, ctx.documents.startEvidence, { 'cache-control': 'no-cache' });
      return;
    }
    if (!NONCE_HEX.test(nonceHex)) throw httpError('invalid_value', "'nonce' must be 32 bytes as 64 hex digits.", 'nonce');
    if (proof === 'signature') {
      if (!signedBuckets.take(clientOf(req, ctx, limits.trustedProxies))) {
        throw new HttpError('rate_limit_exceeded', 'Too many signed-nonce requests; try again shortly.', { headers: { 'retry-after': '1' } });
      }
      const signed = ctx.signNonce(Buffer.from(nonceHex, 'hex'), ctx.attestation.start);
      sendJson(res, 200, `{"attestation":${ctx.documents.startEvidence},"signed_nonce":${JSON.stringify(signed)}}`, { 'cache-control': 'no-store' });
      return;
    }
    // A reload adds an event and may change the policy: a document cached before it must not answer after it.
    const key = `${nonceHex.toLowerCase()}|${ctx.attestation.sources.eventLog?.runtime_events.length ?? 0}|${ctx.receiptContext.policyHash}`;
    let body = cache.get(key);
    if (body === undefined) {
      if (!buckets.take(clientOf(req, ctx, limits.trustedProxies))) {
        throw new HttpError('rate_limit_exceeded', 'Too many fresh attestation requests; try again shortly.', { headers: { 'retry-after': '1' } });
      }
      const nonce = Buffer.from(nonceHex, 'hex');
      const { sources, tlsSpkiSha256, hpkeKeyConfig, transparencyLog } = ctx.attestation;
      const bound = { tlsSpkiSha256, hpkeKeyConfig, ...(transparencyLog === undefined ? {} : { transparencyLog }) };
      body = makeAttestationDocument(sources, { jwks: ctx.jwks, policyHash: ctx.receiptContext.policyHash, ...bound }, nonce).then(({ document }) =>
        JSON.stringify(document),
      );
      cache.set(key, body);
      if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
      body.catch(() => cache.delete(key));
    }
    sendJson(res, 200, await body, { 'cache-control': 'no-store' });
  };
}
