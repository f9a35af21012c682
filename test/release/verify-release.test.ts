import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { checkMark } from '../../src/verify/check.ts';
import { signReleaseWithKey } from '../../src/verify/release/sign-with-key.ts';
import type { ReleaseStatement } from '../../src/verify/release/manifest.ts';
import { releaseSignedAt, verifyRelease } from '../../src/verify/release/verify-release.ts';
import { compareReleaseVersions } from '../../src/verify/release/release-version.ts';
import type { ReleaseTrust } from '../../src/verify/release/trust.ts';
import { releaseStatement, SNP_MEASUREMENT, TDX_MRTD, TDX_RTMR1, TDX_RTMR1_OTHER } from './release-fixtures.ts';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const vector = (name: string): Json => JSON.parse(readFileSync(new URL(`../vectors/sigstore/${name}`, import.meta.url), 'utf8')) as Json;
const bytes = (doc: unknown) => Buffer.from(JSON.stringify(doc));
/** The public-good Rekor v2 bundle from sigstore-js, signed with a certificate for this e-mail identity. */
const REKOR_V2 = 'dsse-rekor-v2-public-good.sigstore.json';
const PUBLIC_GOOD: ReleaseTrust = { kind: 'sigstore', identity: 'brian@dehamer.com', issuer: 'https://github.com/login/oauth' };
const NOW = new Date('2026-11-25T12:00:00Z');

function marks(doc: unknown, trust: ReleaseTrust, now = NOW): Record<string, string> {
  return Object.fromEntries(verifyRelease(bytes(doc), trust, now).checks.map((c) => [c.name, checkMark(c)]));
}

function detail(doc: unknown, trust: ReleaseTrust, name: string, now = NOW): string {
  return verifyRelease(bytes(doc), trust, now).checks.find((c) => c.name === name)!.detail;
}

const ALL_PASS = {
  'release.bundle': 'PASS',
  'release.signer': 'PASS',
  'release.tlog': 'PASS',
  'release.signature': 'PASS',
  'release.identity': 'PASS',
  'release.statement': 'PASS',
  'release.expiry': 'PASS',
  'release.validity': 'PASS',
};

describe('a real public-good Sigstore bundle (sigstore-js test data), against the trust root @sigstore/tuf ships', () => {
  it('verifies certificate, Rekor v2 inclusion proof, signature and identity, then is refused as not being a release manifest', () => {
    const result = verifyRelease(bytes(vector(REKOR_V2)), PUBLIC_GOOD, NOW);
    expect(Object.fromEntries(result.checks.map((c) => [c.name, checkMark(c)]))).toEqual({
      ...ALL_PASS,
      'release.statement': 'FAIL',
      'release.expiry': 'FAIL',
      'release.validity': 'FAIL',
    });
    expect(result.checks.find((c) => c.name === 'release.tlog')!.detail).toContain('(entry 544346)');
    expect(result.checks.find((c) => c.name === 'release.statement')!.detail).toBe(
      'the signed payload is of type text/plain, not an in-toto statement (application/vnd.in-toto+json): it is not a release manifest',
    );
    expect(result).toMatchObject({ ok: false, referenceValues: undefined, statement: undefined });
  });

  it('accepts the identity pinned with a trailing * as a prefix, and nothing looser', () => {
    expect(marks(vector(REKOR_V2), { ...PUBLIC_GOOD, identity: 'brian@*' })['release.identity']).toBe('PASS');
    expect(marks(vector(REKOR_V2), { ...PUBLIC_GOOD, identity: 'brian@dehamer' })['release.identity']).toBe('FAIL');
  });

  it('refuses a signer other than the expected workflow identity, naming both', () => {
    const trust: ReleaseTrust = { ...PUBLIC_GOOD, identity: 'https://github.com/sigil/sigil/.github/workflows/release.yml@refs/tags/*' };
    expect(marks(vector(REKOR_V2), trust)).toMatchObject({ 'release.signature': 'PASS', 'release.identity': 'FAIL', 'release.statement': 'FAIL' });
    expect(detail(vector(REKOR_V2), trust, 'release.identity')).toBe(
      'the manifest was signed by brian@dehamer.com, not by the expected https://github.com/sigil/sigil/.github/workflows/release.yml@refs/tags/*: someone other than the release workflow signed it',
    );
  });

  it('refuses the right name vouched for by another OIDC issuer', () => {
    const trust: ReleaseTrust = { ...PUBLIC_GOOD, issuer: 'https://token.actions.githubusercontent.com' };
    expect(detail(vector(REKOR_V2), trust, 'release.identity')).toBe(
      "the signer's identity was vouched for by https://github.com/login/oauth, not by the expected https://token.actions.githubusercontent.com",
    );
  });

  it('refuses a tampered payload', () => {
    const doc = vector(REKOR_V2);
    doc.dsseEnvelope.payload = Buffer.from('hello, world?').toString('base64');
    expect(marks(doc, PUBLIC_GOOD)).toMatchObject({
      'release.signer': 'PASS',
      'release.tlog': 'FAIL',
      'release.signature': 'FAIL',
      'release.identity': 'FAIL',
    });
  });

  it('refuses a tampered signature', () => {
    const doc = vector(REKOR_V2);
    const sig = Buffer.from(doc.dsseEnvelope.signatures[0].sig, 'base64');
    sig.writeUInt8(sig.readUInt8(sig.length - 1) ^ 1, sig.length - 1);
    doc.dsseEnvelope.signatures[0].sig = sig.toString('base64');
    // The timestamp authority countersigned the original signature bytes, so the altered ones have no timestamp.
    expect(marks(doc, PUBLIC_GOOD)).toMatchObject({ 'release.signer': 'FAIL', 'release.signature': 'FAIL', 'release.identity': 'FAIL' });
    expect(detail(doc, PUBLIC_GOOD, 'release.signer')).toBe(
      'no timestamp from a pinned authority covers this signature, so nothing shows the short-lived signing certificate was valid when it was made (timestamp could not be verified)',
    );
  });

  it('refuses an inclusion proof with one hash changed', () => {
    const doc = vector(REKOR_V2);
    const proof = doc.verificationMaterial.tlogEntries[0].inclusionProof;
    const h = Buffer.from(proof.hashes[3], 'base64');
    h.writeUInt8(h.readUInt8(0) ^ 1, 0);
    proof.hashes[3] = h.toString('base64');
    expect(marks(doc, PUBLIC_GOOD)).toMatchObject({
      'release.signer': 'PASS',
      'release.tlog': 'FAIL',
      'release.signature': 'FAIL',
      'release.identity': 'FAIL',
    });
    expect(detail(doc, PUBLIC_GOOD, 'release.tlog')).toMatch(/^the transparency-log entry does not prove the signature was logged \(/);
  });

  it('refuses a checkpoint whose root hash was replaced', () => {
    const doc = vector(REKOR_V2);
    const proof = doc.verificationMaterial.tlogEntries[0].inclusionProof;
    proof.checkpoint.envelope = proof.checkpoint.envelope.replace(proof.rootHash, Buffer.alloc(32, 7).toString('base64'));
    expect(marks(doc, PUBLIC_GOOD)['release.tlog']).toBe('FAIL');
  });

  it("refuses a bundle carrying only the log's promise (a signed entry timestamp), not an inclusion proof", () => {
    const result = verifyRelease(bytes(vector('dsse-rekor-v1-promise-only.sigstore.json')), PUBLIC_GOOD, NOW);
    expect(Object.fromEntries(result.checks.map((c) => [c.name, checkMark(c)]))).toEqual({
      'release.bundle': 'PASS',
      'release.signer': 'PASS',
      'release.tlog': 'FAIL',
      'release.signature': 'PASS',
      'release.identity': 'FAIL',
      'release.statement': 'FAIL',
      'release.expiry': 'FAIL',
      'release.validity': 'FAIL',
    });
    expect(result.checks.find((c) => c.name === 'release.tlog')!.detail).toBe(
      "the bundle carries only the log's signed promise to include the entry, not an inclusion proof: nothing shows the entry is in the log that everyone sees",
    );
  });

  it('refuses the bundle against a trust root without the Fulcio CA that issued its certificate', () => {
    const root = JSON.parse(readFileSync(new URL('../../node_modules/@sigstore/tuf/seeds.json', import.meta.url), 'utf8'))['https://tuf-repo-cdn.sigstore.dev']
      .targets['trusted_root.json'];
    const trustedRoot = JSON.parse(Buffer.from(root, 'base64').toString('utf8'));
    trustedRoot.certificateAuthorities = [];
    expect(marks(vector(REKOR_V2), { ...PUBLIC_GOOD, trustedRoot })).toMatchObject({
      'release.signer': 'FAIL',
      'release.tlog': 'FAIL',
      'release.signature': 'FAIL',
    });
  });

  it('refuses a file that is not a Sigstore bundle, and says so first', () => {
    const result = verifyRelease(Buffer.from('{"mediaType":"nope"}'), PUBLIC_GOOD, NOW);
    expect(result.checks.map(checkMark)).toEqual(['FAIL', 'FAIL', 'FAIL', 'FAIL', 'FAIL', 'FAIL', 'FAIL', 'FAIL']);
    expect(result.checks[0]!.detail).toMatch(/^the file is not a Sigstore bundle around a signed statement: /);
    expect(result.checks[1]!.detail).toBe('not checked: release.bundle failed first, so nothing this step would vouch for can be trusted');
  });
});

describe('a locally keyed release manifest (sigil release sign --key)', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const privatePem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const KEY: ReleaseTrust = { kind: 'key', publicKey: publicPem };
  const signed = (s: ReleaseStatement = releaseStatement()) => JSON.parse(signReleaseWithKey(s, privatePem)) as Json;

  it('verifies with the pinned key, says the transparency log was waived, and yields its values as reference values', () => {
    const result = verifyRelease(bytes(signed()), KEY, NOW);
    expect(Object.fromEntries(result.checks.map((c) => [c.name, checkMark(c)]))).toEqual({ ...ALL_PASS, 'release.tlog': 'WAIVED' });
    expect(result.checks.find((c) => c.name === 'release.tlog')).toEqual({
      name: 'release.tlog',
      ok: false,
      detail: 'a locally keyed manifest is not in a transparency log, so nobody can see whether its signer published other, conflicting manifests',
      waived: "the signer's key is pinned (--key): the auditor trusts its holder without a transparency log",
    });
    expect(result.ok).toBe(true);
    expect(result.referenceValues).toEqual({
      sigil: { manifest_sha384: ['5e'.repeat(48)] },
      snp: { measurement: [SNP_MEASUREMENT] },
      tdx: { mrtd: [TDX_MRTD], rtmr0: ['00'.repeat(48)], rtmr1: [TDX_RTMR1, TDX_RTMR1_OTHER], rtmr2: ['22'.repeat(48)] },
    });
    expect(result.statement!.predicate.image.root_hash).toBe('ab'.repeat(32));
  });

  it('refuses a manifest past its expiry, naming the time', () => {
    const result = verifyRelease(bytes(signed()), KEY, new Date('2026-12-02T00:00:00Z'));
    expect(result.checks.find((c) => c.name === 'release.expiry')).toEqual({
      name: 'release.expiry',
      ok: false,
      detail:
        'the manifest expired at 2026-12-02T00:00:00.000Z (now 2026-12-02T00:00:00.000Z): its values may describe firmware or code with known flaws; fetch the current release manifest',
    });
    expect(result).toMatchObject({ ok: false, referenceValues: undefined });
  });

  it('refuses a manifest signed by another key', () => {
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect(marks(signed(), { kind: 'key', publicKey: other })).toMatchObject({
      'release.signer': 'FAIL',
      'release.signature': 'FAIL',
      'release.statement': 'FAIL',
    });
  });

  it('refuses a manifest whose values were changed after signing', () => {
    const doc = signed();
    const statement = JSON.parse(Buffer.from(doc.dsseEnvelope.payload, 'base64').toString('utf8'));
    statement.predicate.targets[0].measurements.measurement = 'ff'.repeat(48);
    doc.dsseEnvelope.payload = Buffer.from(JSON.stringify(statement)).toString('base64');
    const result = verifyRelease(bytes(doc), KEY, NOW);
    expect(result.checks.find((c) => c.name === 'release.signature')!.detail).toBe(
      'the signature does not match the manifest: it was altered after signing, or signed by another key (signature verification failed)',
    );
    expect(result).toMatchObject({ ok: false, referenceValues: undefined, statement: undefined });
  });

  it('refuses a keyed manifest where a Sigstore workflow identity is expected', () => {
    expect(detail(signed(), PUBLIC_GOOD, 'release.signer')).toBe(
      'the manifest is signed with a bare key, not a Sigstore certificate for the expected workflow: pin that key with --key if you trust its holder',
    );
  });

  it('refuses a certificate-signed bundle where a key is pinned', () => {
    expect(marks(vector(REKOR_V2), KEY)['release.signer']).toBe('FAIL');
  });

  it('refuses a signed statement that is not a release manifest, naming the field', () => {
    const statement = releaseStatement() as unknown as Json;
    delete statement.predicate.expires;
    const result = verifyRelease(bytes(signed(statement as ReleaseStatement)), KEY, NOW);
    expect(result.checks.find((c) => c.name === 'release.statement')!.detail).toBe(
      'the signed statement is not a Sigil release manifest: predicate.expires: must be a non-empty string',
    );
    expect(checkMark(result.checks.find((c) => c.name === 'release.expiry')!)).toBe('FAIL');
  });
});

describe('sigil/verify (src/verify/index.ts): the release verifier a user imports', () => {
  it('exports verifyRelease, which waives a keyed release.tlog and gives reference values only when every check passed', async () => {
    const api = await import('../../src/verify/index.ts');
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const trust: ReleaseTrust = { kind: 'key', publicKey: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
    const bundle = Buffer.from(signReleaseWithKey(releaseStatement(), privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()));
    const ok = api.verifyRelease(bundle, trust, NOW);
    expect(ok.ok).toBe(true);
    expect(ok.checks.map((c) => `${checkMark(c)} ${c.name}`)).toContain('WAIVED release.tlog');
    expect(ok.checks.find((c) => c.name === 'release.tlog')!.waived).toBe(
      "the signer's key is pinned (--key): the auditor trusts its holder without a transparency log",
    );
    expect(ok.referenceValues?.snp).toEqual({ measurement: [SNP_MEASUREMENT] });
    const expired = api.verifyRelease(bundle, trust, new Date('2026-12-02T00:00:00Z'));
    expect(expired.checks.filter((c) => checkMark(c) === 'FAIL').map((c) => c.name)).toEqual(['release.expiry']);
    expect(expired.ok).toBe(false);
    expect(expired.referenceValues).toBeUndefined();
    expect(expired.statement).toBeUndefined();
    // Declared once, so the client and the trust page can explain each release check in words.
    for (const c of ok.checks) expect(api.describeCheck(c.name)?.title).toBe('Release manifest');
  });
});

describe('downgrades: a minimum version and a maximum validity', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const KEY: ReleaseTrust = { kind: 'key', publicKey: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
  const DAY = 86_400_000;
  const manifest = (version: string, expires: Date) => {
    const statement = releaseStatement();
    statement.predicate.version = version;
    statement.predicate.expires = expires.toISOString().replace(/\.\d+Z$/, 'Z');
    return Buffer.from(signReleaseWithKey(statement, privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()));
  };
  const check = (result: ReturnType<typeof verifyRelease>, name: string) => result.checks.find((c) => c.name === name);

  it("refuses a manifest from the pinned signer valid for a century, by default (30 days, the release workflow's own)", () => {
    const result = verifyRelease(manifest('0.1.0', new Date('2126-11-25T12:00:00Z')), KEY, NOW);
    expect(check(result, 'release.expiry')!.ok).toBe(true);
    expect(check(result, 'release.validity')).toEqual({
      name: 'release.validity',
      ok: false,
      detail:
        "the manifest stays valid for 36524 days from now (2026-11-25T12:00:00.000Z; a keyed manifest carries no signing time the verifier can trust) until 2126-11-25T12:00:00.000Z, longer than the 30 days allowed (release.max_validity_days in your reference values; 30, the release workflow's own, when not given): a manifest that lives that long keeps its values acceptable long after a newer release replaces them",
    });
    expect(result).toMatchObject({ ok: false, referenceValues: undefined, statement: undefined });
  });

  it('accepts 30 days and refuses 31 by default; the auditor may allow more', () => {
    expect(check(verifyRelease(manifest('0.1.0', new Date(NOW.getTime() + 30 * DAY)), KEY, NOW), 'release.validity')).toMatchObject({ ok: true });
    const long = manifest('0.1.0', new Date(NOW.getTime() + 31 * DAY));
    expect(check(verifyRelease(long, KEY, NOW), 'release.validity')).toMatchObject({ ok: false });
    const allowed = verifyRelease(long, KEY, NOW, { max_validity_days: 60 });
    expect(check(allowed, 'release.validity')!.detail).toBe(
      "the manifest stays valid for at most 31 days from now (2026-11-25T12:00:00.000Z; a keyed manifest carries no signing time the verifier can trust), within the 60 days allowed (release.max_validity_days in your reference values; 30, the release workflow's own, when not given)",
    );
    expect(allowed.ok).toBe(true);
  });

  it('refuses an older release that expires later once a minimum version is required, and accepts the current one', () => {
    const older = manifest('0.1.0', new Date(NOW.getTime() + 20 * DAY));
    const current = manifest('0.2.0', new Date(NOW.getTime() + 5 * DAY));
    // Without a minimum, both pass: the statement says so in words.
    expect(verifyRelease(older, KEY, NOW).ok).toBe(true);
    expect(check(verifyRelease(older, KEY, NOW), 'release.statement')!.detail).toContain(
      'no minimum version is required (release.min_version in your reference values), so any unexpired release from this signer is accepted',
    );
    const refused = verifyRelease(older, KEY, NOW, { min_version: '0.2.0' });
    expect(check(refused, 'release.version')).toEqual({
      name: 'release.version',
      ok: false,
      detail:
        'the manifest is for release 0.1.0, older than 0.2.0, the oldest your reference values accept (release.min_version): an older release stays signed and unexpired for a while after a newer one fixes its flaws',
    });
    expect(refused).toMatchObject({ ok: false, referenceValues: undefined });
    const accepted = verifyRelease(current, KEY, NOW, { min_version: '0.2.0' });
    expect(check(accepted, 'release.version')).toMatchObject({ ok: true });
    expect(accepted.ok).toBe(true);
    // A release that is no semantic version cannot be compared: refused, never let through.
    expect(check(verifyRelease(manifest('nightly', new Date(NOW.getTime() + DAY)), KEY, NOW, { min_version: '0.2.0' }), 'release.version')).toMatchObject({
      ok: false,
    });
  });

  it("counts a keyless manifest's validity from its signing certificate's start, a keyed one's from now", () => {
    const doc = vector(REKOR_V2);
    const material = doc.verificationMaterial as { certificate?: { rawBytes: string }; x509CertificateChain?: { certificates: { rawBytes: string }[] } };
    const der = material.certificate?.rawBytes ?? material.x509CertificateChain!.certificates[0]!.rawBytes;
    const notBefore = new X509Certificate(Buffer.from(der, 'base64')).validFrom;
    expect(releaseSignedAt(bytes(doc), PUBLIC_GOOD)).toEqual(new Date(notBefore));
    expect(releaseSignedAt(manifest('0.1.0', new Date(NOW.getTime() + DAY)), KEY)).toBeUndefined();
  });

  it("orders versions by SemVer 2.0.0 precedence (semver.org section 11's examples), numerically, never as text", () => {
    const ordered = [
      '1.0.0-alpha',
      '1.0.0-alpha.1',
      '1.0.0-alpha.beta',
      '1.0.0-beta',
      '1.0.0-beta.2',
      '1.0.0-beta.11',
      '1.0.0-rc.1',
      '1.0.0',
      '2.0.0',
      '2.1.0',
      '2.1.1',
      '10.0.0',
    ];
    for (let i = 0; i + 1 < ordered.length; i++) {
      expect([ordered[i], compareReleaseVersions(ordered[i]!, ordered[i + 1]!)! < 0]).toEqual([ordered[i], true]);
      expect([ordered[i], compareReleaseVersions(ordered[i + 1]!, ordered[i]!)! > 0]).toEqual([ordered[i], true]);
    }
    expect(compareReleaseVersions('v1.2.3', '1.2.3+build.5')).toBe(0);
    expect(compareReleaseVersions('1.2', '1.0.0')).toBeUndefined();
  });
});
