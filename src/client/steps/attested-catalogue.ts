import { field } from '../../verify/binding.ts';
import type { Prepared } from './stage.ts';

/** The response header naming where an answer came from when the client made it itself from what the attestation binds. */
export const SOURCE_HEADER = 'x-attested-fetch-source';

interface PolicyModel {
  id: string;
  provider: string;
}

/** The models the attested policy names (docs/attestation.md, "The policy document"): the only model list the attestation binds. */
function policyModels(policy: unknown): PolicyModel[] {
  const models = field(policy, 'models');
  if (!Array.isArray(models)) return [];
  return models.flatMap((m) => {
    const id = field(m, 'id');
    const provider = field(m, 'provider');
    return typeof id === 'string' ? [{ id, provider: typeof provider === 'string' ? provider : 'unknown' }] : [];
  });
}

const item = (m: PolicyModel) => ({ id: m.id, object: 'model', created: 0, owned_by: m.provider });

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: {
      'content-type': 'application/json',
      [SOURCE_HEADER]: 'the attested policy: only the model ids and providers it binds (names, prices and context windows are not bound, so not given)',
    },
  });
}

/**
 * Step two, for the model list when nothing would authenticate the service's own answer (TLS not ending in the enclave,
 * and a GET has no body to seal): the answer is made here from the attested policy, whose hash the attestation binds, so
 * a relay cannot add, drop or rename a model. Undefined for any other request, which goes to the service.
 */
export function attestedCatalogue(prepared: Prepared, base: URL): Response | undefined {
  if (prepared.method !== 'GET' || prepared.attested.tlsSpkiSha256 !== null) return undefined;
  const root = base.pathname.replace(/\/+$/, '');
  const path = prepared.url.pathname;
  const models = policyModels(prepared.attested.policy);
  if (path === `${root}/models`) return json(200, { object: 'list', data: models.map(item) });
  if (!path.startsWith(`${root}/models/`)) return undefined;
  let id: string;
  try {
    id = decodeURIComponent(path.slice(`${root}/models/`.length));
  } catch {
    return json(400, {
      error: { message: 'The model id in the path is not valid percent-encoding.', type: 'invalid_request_error', param: 'model', code: 'invalid_value' },
    });
  }
  const model = models.find((m) => m.id === id);
  return model === undefined
    ? json(404, {
        error: {
          message: `The model '${id}' is not in the service's attested policy.`,
          type: 'invalid_request_error',
          param: 'model',
          code: 'model_not_found',
        },
      })
    : json(200, item(model));
}
