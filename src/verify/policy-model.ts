import { fail, pass } from './check.ts';
import type { Check } from './check.ts';
import type { SelectedModel } from './claims.ts';

/** The receipt's model must be one the policy document declares, with the same model_hash. */
export function policyModelCheck(policy: unknown, model: SelectedModel): Check {
  const models = typeof policy === 'object' && policy !== null ? (policy as { models?: unknown }).models : undefined;
  if (!Array.isArray(models)) return fail('policy.model', 'the policy document lists no models');
  const entry = models.find((m): m is Record<string, unknown> => typeof m === 'object' && m !== null && (m as { id?: unknown }).id === model.model_id);
  if (entry === undefined) return fail('policy.model', `the policy does not declare model ${model.model_id}`);
  if (entry.model_hash !== model.model_hash) {
    return fail('policy.model', `the policy gives ${model.model_id} model_hash ${String(entry.model_hash)}; the receipt says ${model.model_hash}`);
  }
  return pass('policy.model', `the policy declares ${model.model_id} with model_hash ${model.model_hash}`);
}
