import { z } from 'zod';

/**
 * The endpoints a model can be served on: OpenAI's (docs/api.md#completions-embeddings-responses) and Anthropic's Messages API
 * (docs/api.md#anthropic-messages), which only an engine that serves it declares.
 */
export const ENDPOINTS = ['chat', 'completions', 'embeddings', 'responses', 'messages', 'messages_count_tokens'] as const;
export type Endpoint = (typeof ENDPOINTS)[number];
/** An entry without `endpoints` is a generative model: everything but embeddings. */
export const DEFAULT_ENDPOINTS: readonly Endpoint[] = ['chat', 'completions', 'responses'];

/** One entry of config/models.yaml (docs/configuration.md#the-model-catalogue). */
const modelEntry = z.strictObject({
  id: z.string().min(1).max(256),
  name: z.string().min(1),
  provider: z.string().min(1),
  owned_by: z.string().min(1).optional(),
  /** Unix seconds, as OpenAI's `created`. */
  created: z.number().int().nonnegative(),
  context_window: z.number().int().positive(),
  /** Absent: false (a self-hosted model that does not reason). */
  reasoning: z.boolean().default(false),
  /** Absent: `[local]` (a self-hosted model served where Sigil runs). */
  regions: z.array(z.string().min(1)).min(1).default(['local']),
  /** Absent: free (0 per million tokens, USD), as a self-hosted model is. */
  pricing: z
    .strictObject({
      input_per_mtok: z.number().nonnegative(),
      output_per_mtok: z.number().nonnegative(),
      currency: z
        .string()
        .regex(/^[A-Z]{3}$/, 'an ISO 4217 code such as USD')
        .default('USD'),
    })
    .default({ input_per_mtok: 0, output_per_mtok: 0, currency: 'USD' }),
  model_hash: z.string().regex(/^sha256:[0-9a-f]{64}$/, 'sha256: followed by 64 lowercase hex digits'),
  /** Name(s) of the upstreams in sigil.yaml that serve it; default: every configured upstream. */
  upstream: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
  /** The weights the engine serves it from (a GGUF file or a model directory), relative to the catalogue file: hashed at start against `model_hash`. */
  weights: z.string().min(1).optional(),
  /** The engine's name for the model, when it differs from `id`. */
  upstream_model: z.string().min(1).optional(),
  description: z.string().optional(),
  /** The endpoints it serves (docs/api.md#completions-embeddings-responses); default: all but embeddings. */
  endpoints: z
    .array(z.enum(ENDPOINTS))
    .min(1)
    .refine((list) => new Set(list).size === list.length, 'each endpoint once')
    .optional(),
});

export const catalogueSchema = z.strictObject({ models: z.array(modelEntry).min(1) });

export type CatalogueEntry = z.infer<typeof modelEntry>;
