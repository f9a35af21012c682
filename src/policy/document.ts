import type { Catalogue } from '../catalogue/catalogue.ts';
import type { SigilConfig } from '../config/schema.ts';
import { policyUpstream, type PolicyUpstream } from './upstreams.ts';

/** What this deployment promises (docs/attestation.md#the-policy-document), hashed into every receipt as `policy_hash`; derived from the running configuration. */
export interface PolicyDocument {
  schema_version: '1.1.0';
  models: Array<{
    id: string;
    provider: string;
    model_hash: string;
    upstream_model: string;
    upstreams: Array<{ name: string; url: string; region: string | null }>;
  }>;
  /** Every engine: where it runs (inside the VM or not), how bytes reach it, which client headers it gets. */
  upstreams: PolicyUpstream[];
  attestation: { provider: string };
  logging: {
    level: SigilConfig['log']['level'];
    prompt_content: 'never';
    completion_content: 'never';
    api_keys: 'never';
    /** The fields of the lines written at this level; none when the level writes no request lines. */
    request_fields: string[];
  };
  receipts: { alg: 'ES256'; retention_s: number };
}

/** The request line (info) and the request-received line (debug): no other line names a request. */
const REQUEST_LINE_FIELDS = [
  'request_id',
  'method',
  'route',
  'path',
  'status',
  'latency_ms',
  'model',
  'key_id',
  'upstream',
  'stream',
  'receipt',
  'usage_tokens',
  'error_code',
];
const LEVELS_WITH_REQUEST_LINES = new Set(['info', 'debug', 'trace']);

export function buildPolicy(catalogue: Catalogue, config: Pick<SigilConfig, 'upstreams' | 'attestation' | 'receipts' | 'log'>): PolicyDocument {
  return {
    schema_version: '1.1.0',
    models: catalogue.models.map((m) => ({
      id: m.id,
      provider: m.provider,
      model_hash: m.model_hash,
      upstream_model: m.upstream_model,
      upstreams: m.upstreams.map((name) => ({ name, url: config.upstreams[name]!.url, region: config.upstreams[name]!.region ?? null })),
    })),
    upstreams: Object.entries(config.upstreams).map(([name, u]) => policyUpstream(name, u)),
    attestation: { provider: config.attestation.provider },
    logging: {
      level: config.log.level,
      prompt_content: 'never',
      completion_content: 'never',
      api_keys: 'never',
      request_fields: LEVELS_WITH_REQUEST_LINES.has(config.log.level) ? REQUEST_LINE_FIELDS : [],
    },
    receipts: { alg: 'ES256', retention_s: config.receipts.retention_s },
  };
}
