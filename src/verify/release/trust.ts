import { createHash, createPublicKey } from 'node:crypto';
// The TUF seed @sigstore/tuf ships, as data: bundled into @sigil/client, so it installs without @sigstore/tuf's fetching code.
import seeds from '@sigstore/tuf/seeds.json' with { type: 'json' };
import { ReleaseError } from './errors.ts';

/**
 * Whom a release manifest must come from. `sigstore`: a keyless signature by a CI workflow, checked against a
 * pinned Sigstore trust root (default: the public-good root `@sigstore/tuf` ships, read offline). `key`: a
 * signature by the holder of one pinned key, for operators who publish their own manifests.
 */
export type ReleaseTrust = SigstoreReleaseTrust | KeyReleaseTrust;

export interface SigstoreReleaseTrust {
  kind: 'sigstore';
  /**
   * The certificate identity: for a GitHub Actions workflow, its URI with the ref, e.g.
   * `https://github.com/OWNER/REPO/.github/workflows/release.yml@refs/tags/v1.0.0`. A final `*` matches any
   * ending (e.g. any tag); nothing else is a pattern.
   */
  identity: string;
  /** The OIDC issuer the certificate names, e.g. `https://token.actions.githubusercontent.com`. */
  issuer: string;
  /** A Sigstore trusted root (trustedroot+json); absent: the public-good root @sigstore/tuf ships. */
  trustedRoot?: unknown;
}

export interface KeyReleaseTrust {
  kind: 'key';
  /** The signer's public key, PEM (SPKI). */
  publicKey: string;
}

/** The public-good Sigstore trusted root embedded in `@sigstore/tuf` (its TUF seed), read from disk: no network. */
export function publicGoodTrustedRoot(): unknown {
  const target = (seeds as Record<string, { targets?: Record<string, string> }>)['https://tuf-repo-cdn.sigstore.dev']?.targets?.['trusted_root.json'];
  if (target === undefined) throw new ReleaseError('ERR_RELEASE_TRUST_ROOT', '@sigstore/tuf ships no public-good trusted_root.json');
  return JSON.parse(Buffer.from(target, 'base64').toString('utf8')) as unknown;
}

/** The key hint a locally keyed bundle carries: SHA-256 of the key's SPKI DER, hex (as cosign and sigstore-js do). */
export function publicKeyHint(publicKeyPem: string): string {
  const der = createPublicKey(publicKeyPem).export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('hex');
}

/** Exact match, or a prefix match where the pinned identity ends with `*`. */
export function identityMatches(pinned: string, actual: string | undefined): boolean {
  if (actual === undefined) return false;
  return pinned.endsWith('*') ? actual.startsWith(pinned.slice(0, -1)) : actual === pinned;
}
