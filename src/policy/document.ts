import type { Catalogue } from '../catalogue/catalogue.ts';
import type { SigilConfig } from '../config/schema.ts';

/** SPEC 5: what this deployment promises, hashed into every receipt as `policy_hash`. */
export interface PolicyDocument {
  schema_version: '1.0.0';
  models: Array<{ id: string; provider: string; model_hash: string; upstream_model: string; upstreams: Array<{ name: string; url: string; region: string | null }> }>;
  attestation: { provider: string };
  logging: { prompt_content: 'never'; completion_content: 'never'; api_keys: 'never'; request_fields: string[] };
  receipts: { alg: 'ES256'; retention_s: number };
}

const LOGGED_FIELDS = ['request_id', 'method', 'route', 'path', 'status', 'latency_ms', 'model', 'key_id', 'upstream', 'stream', 'receipt', 'usage_tokens', 'error_code'];

export function buildPolicy(catalogue: Catalogue, config: Pick<SigilConfig, 'upstreams' | 'attestation' | 'receipts'>): PolicyDocument {
  return {
    schema_version: '1.0.0',
    models: catalogue.models.map((m) => ({
      id: m.id,
      provider: m.provider,
      model_hash: m.model_hash,
      upstream_model: m.upstream_model,
      upstreams: m.upstreams.map((name) => ({ name, url: config.upstreams[name]!.url, region: config.upstreams[name]!.region ?? null })),
    })),
    attestation: { provider: config.attestation.provider },
    logging: { prompt_content: 'never', completion_content: 'never', api_keys: 'never', request_fields: LOGGED_FIELDS },
    receipts: { alg: 'ES256', retention_s: config.receipts.retention_s },
  };
}
