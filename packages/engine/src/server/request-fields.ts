import { invalidRequest } from './errors.ts';

/** Field readers shared by the engine's request parsers; each throws a 400 naming the field. */

const MAX_STOP_SEQUENCES = 4;

export function parseMaxTokens(body: Record<string, unknown>): number | undefined {
  const field = body.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens';
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || (value as number) < 1) throw invalidRequest(`${field} must be a positive integer.`, field);
  return value as number;
}

export function parseStreamOptions(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (!isObject(value)) throw invalidRequest('stream_options must be an object.', 'stream_options');
  return optionalBoolean(value.include_usage, 'stream_options.include_usage') ?? false;
}

export function parseStop(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  const stops = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(stops) || stops.length > MAX_STOP_SEQUENCES || !stops.every((s) => typeof s === 'string' && s.length > 0)) {
    throw invalidRequest(`stop must be a non-empty string or an array of at most ${MAX_STOP_SEQUENCES} of them.`, 'stop');
  }
  return stops as string[];
}

export function optionalBoolean(value: unknown, param: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw invalidRequest(`${param} must be a boolean.`, param);
  return value;
}

export function optionalNumber(value: unknown, param: string, min: number, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw invalidRequest(`${param} must be a number from ${min} to ${max}.`, param);
  }
  return value;
}

export function optionalInteger(value: unknown, param: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Number.isSafeInteger(value)) throw invalidRequest(`${param} must be an integer.`, param);
  return value as number;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
