import type { AttestationDocumentV2, EvidenceSources } from '../attestation/document.ts';
import type { MeasuredState } from '../attestation/measured-state.ts';
import type { KeyRing } from '../auth/bearer.ts';
import type { Catalogue } from '../catalogue/catalogue.ts';
import type { LoadedConfig } from '../config/load.ts';
import type { Logger } from '../logger/logger.ts';
import type { UpstreamSet } from '../proxy/upstream.ts';
import type { ReceiptContext } from '../receipts/claims.ts';
import type { SignReceipt } from '../receipts/signer.ts';
import type { SignNonce } from '../receipts/signed-nonce.ts';
import type { SigningKey } from '../receipts/signing-key.ts';
import type { ReceiptStore } from '../receipts/store.ts';
import type { Jwks, TransparencyLogBinding } from '../protocol/attestation.ts';
import type { ChatLimits } from '../limits/chat-limits.ts';
import type { FleetStatus } from '../fleet/connection.ts';
import type { SigilMetrics } from '../metrics/registry.ts';
import type { EhbpSettings } from './pipeline/ehbp.ts';
import type { RequestTracing } from '../tracing/request-tracing.ts';
import type { BrandHeaders } from '../protocol/brand-headers.ts';
import type { ServedLog } from '../tlog/served-log.ts';

export { brandHeaders, type BrandHeaders } from '../protocol/brand-headers.ts';

/** Everything a request handler may use. The parts that reload (keys, catalogue, policy) are swapped whole. */
export interface AppContext {
  config: LoadedConfig;
  logger: Logger;
  metrics: SigilMetrics;
  headers: BrandHeaders;
  keyRing: KeyRing;
  limits: ChatLimits;
  catalogue: Catalogue;
  upstreams: UpstreamSet;
  signingKey: SigningKey;
  signReceipt: SignReceipt;
  /** Signs a client's nonce with the receipt key, for freshness without a hardware report (docs/attestation.md). */
  signNonce: SignNonce;
  receiptStore: ReceiptStore;
  receiptContext: ReceiptContext;
  jwks: Jwks;
  /** Pre-serialised bodies of the documents that only change on reload. */
  documents: { jwks: string; policy: string; startEvidence: string };
  /** What fresh attestation documents are made from; `start` is the document made at start (docs/attestation.md#the-document-version-2). */
  attestation: {
    sources: EvidenceSources;
    tlsSpkiSha256: string | null;
    hpkeKeyConfig: string | null;
    /** The transparency log's origin and key, bound in every document; absent without a log. */
    transparencyLog?: TransparencyLogBinding;
    start: AttestationDocumentV2;
  };
  /** Encrypted bodies (docs/ehbp.md): the enclave's HPKE key and the key config served at /.well-known/hpke-keys; absent when off. */
  ehbp?: EhbpSettings & { keyConfig: Buffer };
  /** Present in fleet mode (docs/operations.md#fleet-mode): whether the shared state in Redis is reachable. */
  fleet?: FleetStatus;
  /** The runtime events and what a reload measures (docs/attestation.md); with or without hardware. */
  measured?: MeasuredState;
  /** OpenTelemetry spans, one per request; absent unless `tracing.otlp_endpoint` is set. */
  tracing?: RequestTracing;
  /** The transparency log every receipt is appended to (docs/log.md): this process's, or the primary's for a worker; absent unless `transparency_log` is set. */
  transparencyLog?: ServedLog;
}
