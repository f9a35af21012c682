import type { ReleaseTrust } from '../verify/release/trust.ts';
import type { OptionSpecs } from './command-line.ts';

/** The options naming whom a release manifest must come from, shared by `sigil release verify`, `sigil verify` and `sigil verify-evidence`. */
export const RELEASE_TRUST_OPTIONS = {
  key: { type: 'string', value: 'PUB.pem', description: 'the release signing public key the manifest must be signed with (pinned: release.tlog is waived)' },
  identity: {
    type: 'string',
    value: 'ID',
    description:
      "the Sigstore certificate identity of the manifest's signer, e.g. https://github.com/OWNER/REPO/.github/workflows/release.yml@refs/tags/v1.0.0 (a final * matches any ending)",
  },
  issuer: { type: 'string', value: 'URL', description: "that identity's OIDC issuer, e.g. https://token.actions.githubusercontent.com" },
  'trusted-root': {
    type: 'string',
    value: 'FILE',
    description: 'a Sigstore trusted root instead of the public-good one @sigstore/tuf ships',
  },
} as const satisfies OptionSpecs;

/** How each command reads a file and reports bad usage or an unreadable input, in its own words. */
export interface ReleaseTrustIo {
  read(path: string, what: string): Promise<Buffer>;
  usage(message: string): Error;
  unreadable(message: string): Error;
}

/** The trust `--key PUB.pem` or `--identity ID --issuer URL [--trusted-root FILE]` give (docs/release.md). */
export async function releaseTrustFrom(values: Record<string, unknown>, io: ReleaseTrustIo): Promise<ReleaseTrust> {
  const key = values.key as string | undefined;
  const identity = values.identity as string | undefined;
  const issuer = values.issuer as string | undefined;
  const root = values['trusted-root'] as string | undefined;
  if (key !== undefined && (identity !== undefined || issuer !== undefined || root !== undefined))
    throw io.usage('give --key, or --identity and --issuer, not both');
  if (key !== undefined) return { kind: 'key', publicKey: (await io.read(key, 'public key')).toString('utf8') };
  if (identity === undefined || issuer === undefined)
    throw io.usage('verify needs --key PUB.pem, or both --identity and --issuer: a manifest from an unnamed signer proves nothing');
  const trust: ReleaseTrust = { kind: 'sigstore', identity, issuer };
  if (root !== undefined) {
    const text = (await io.read(root, 'trusted root')).toString('utf8');
    try {
      trust.trustedRoot = JSON.parse(text) as unknown;
    } catch {
      throw io.unreadable(`trusted root ${root} is not JSON`);
    }
  }
  return trust;
}

/**
 * What is wrong with how `--release` and its signer options were combined, or undefined: they go together,
 * with one way of naming the signer. `--reference` may come too, for values a release does not state (docs/release.md).
 */
export function releaseUsageProblem(release: string | undefined, values: Record<string, unknown>): string | undefined {
  const given = Object.keys(RELEASE_TRUST_OPTIONS).filter((name) => values[name] !== undefined);
  if (release === undefined)
    return given.length > 0 ? `${given.map((n) => `--${n}`).join(', ')} name the signer of a release manifest: give --release FILE too` : undefined;
  if (values.key !== undefined && given.length > 1) return 'give --key, or --identity and --issuer, not both';
  if (values.key === undefined && (values.identity === undefined || values.issuer === undefined)) {
    return '--release needs --key PUB.pem, or both --identity and --issuer: a manifest from an unnamed signer proves nothing';
  }
  return undefined;
}
