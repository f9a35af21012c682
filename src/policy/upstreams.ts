import type { UpstreamConfig } from '../config/schema.ts';

/** Where an engine runs as far as its URL tells: in this VM (a loopback address) or anywhere else. */
export type UpstreamPlace = 'inside_vm' | 'outside_vm';

/** How the bytes reach an engine outside the VM, as the policy states it. */
export type UpstreamTransport = 'loopback' | 'tls_pinned' | 'tls' | 'plaintext';

export interface PolicyUpstream {
  name: string;
  url: string;
  region: string | null;
  place: UpstreamPlace;
  transport: UpstreamTransport;
  /** The SHA-256 of the engine's TLS public key (SPKI) every connection must present; null: not pinned. */
  tls_pin_sha256: string | null;
  /** The operator's explicit setting that this engine may run outside the VM without a pinned key. */
  allow_outside_vm: boolean;
  /** Client headers passed to this engine (an `authorization` here hands it the caller's API key). */
  forward_headers: string[];
  /** Whether each API key's own prefix-cache salt is sent (`cache_salt`): one key cannot time another's prompts through cache hits. */
  cache_salt: boolean;
}

function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

export function upstreamPlace(url: string): UpstreamPlace {
  return isLoopback(new URL(url).hostname) ? 'inside_vm' : 'outside_vm';
}

export function policyUpstream(name: string, config: UpstreamConfig): PolicyUpstream {
  const place = upstreamPlace(config.url);
  const https = new URL(config.url).protocol === 'https:';
  const pin = config.tls_pin_sha256 ?? null;
  const transport: UpstreamTransport = place === 'inside_vm' ? 'loopback' : pin !== null ? 'tls_pinned' : https ? 'tls' : 'plaintext';
  return {
    name,
    url: config.url,
    region: config.region ?? null,
    place,
    transport,
    tls_pin_sha256: pin,
    allow_outside_vm: config.allow_outside_vm,
    forward_headers: [...config.forward_headers],
    cache_salt: config.cache_salt,
  };
}

/**
 * Why an engine may not serve a confidential VM's prompts, or undefined: outside the VM it needs TLS pinned
 * to a key the config names, or `allow_outside_vm: true`, which the policy then shows.
 */
export function outsideVmProblem(upstream: PolicyUpstream): string | undefined {
  if (upstream.place === 'inside_vm' || upstream.transport === 'tls_pinned' || upstream.allow_outside_vm) return undefined;
  return (
    `upstreams.${upstream.name}: ${upstream.url} is outside this confidential VM, so prompts would leave it ` +
    `${upstream.transport === 'plaintext' ? 'in plaintext' : 'over TLS no attested key vouches for'}. ` +
    "Pin the engine's TLS key (tls_pin_sha256: the SHA-256 of its SPKI, with an https URL), or set allow_outside_vm: true, which the policy shows."
  );
}
