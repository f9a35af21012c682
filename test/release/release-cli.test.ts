import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { releaseCommand } from '../../src/cli/release.ts';
import { parseReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';
import { releaseStatement, SNP_MEASUREMENT } from './release-fixtures.ts';
import { describeCheck } from '../../src/verify/check-registry.ts';

const NOW = new Date('2026-11-25T12:00:00Z');
const dir = mkdtempSync(join(tmpdir(), 'sigil-release-'));
const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const KEY = join(dir, 'release.key');
const PUB = join(dir, 'release.pub');
const STATEMENT = join(dir, 'statement.json');
writeFileSync(KEY, privateKey.export({ type: 'pkcs8', format: 'pem' }));
writeFileSync(PUB, publicKey.export({ type: 'spki', format: 'pem' }));
writeFileSync(STATEMENT, JSON.stringify(releaseStatement(), null, 2));
const REKOR_V2 = new URL('../vectors/sigstore/dsse-rekor-v2-public-good.sigstore.json', import.meta.url).pathname;

async function release(argv: string[], now = NOW): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await releaseCommand(argv, { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, now });
  return { code, stdout, stderr };
}

describe('sigil release', () => {
  it('signs a manifest with a local key, verifies it with the public key, and writes the reference values sigil verify reads', async () => {
    const bundle = join(dir, 'signed.sigstore.json');
    const signed = await release(['sign', '--key', KEY, '--out', bundle, STATEMENT]);
    expect(signed).toEqual({
      code: 0,
      stdout: '',
      stderr: `signed ${STATEMENT} with ${KEY}: wrote its bundle (${readFileSync(bundle).length} bytes) to ${bundle}\n`,
    });
    const refOut = join(dir, 'reference.json');
    const verified = await release(['verify', bundle, '--key', PUB, '--reference-out', refOut]);
    expect(verified.code).toBe(0);
    const heading = describeCheck('release.bundle')!;
    expect(verified.stdout.split('\n').map((l) => l.split(' — ')[0])).toEqual([
      `# ${heading.title}: ${heading.explains} (${heading.doc})`,
      'PASS release.bundle',
      'PASS release.signer',
      'WAIVED release.tlog',
      'PASS release.signature',
      'PASS release.identity',
      'PASS release.statement',
      'PASS release.expiry',
      'PASS release.validity',
      'verified with waivers: 7 checks passed; 1 waived (release.tlog)',
      `reference values written to ${refOut}`,
      '',
    ]);
    expect(parseReferenceValues(readFileSync(refOut, 'utf8')).snp).toEqual({ measurement: [SNP_MEASUREMENT] });
  });

  it('refuses an expired manifest with exit status 1 and writes no reference values', async () => {
    const bundle = join(dir, 'expiring.sigstore.json');
    await release(['sign', '--key', KEY, '--out', bundle, STATEMENT]);
    const refOut = join(dir, 'never.json');
    const result = await release(['verify', bundle, '--key', PUB, '--reference-out', refOut, '--at', '2026-12-03T00:00:00Z']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('FAIL release.expiry — the manifest expired at 2026-12-02T00:00:00.000Z (now 2026-12-03T00:00:00.000Z)');
    expect(result.stdout.split('\n').at(-2)).toBe('NOT VERIFIED: 1 of 8 checks failed; 1 waived (release.tlog)');
    expect(() => readFileSync(refOut)).toThrow(/ENOENT/);
  });

  it('refuses a release older than --min-version and one valid longer than --max-validity-days, exit status 1', async () => {
    const bundle = join(dir, 'old.sigstore.json');
    await release(['sign', '--key', KEY, '--out', bundle, STATEMENT]);
    const old = await release(['verify', bundle, '--key', PUB, '--min-version', '0.2.0']);
    expect(old.code).toBe(1);
    expect(old.stdout).toContain('FAIL release.version — the manifest is for release 0.1.0, older than 0.2.0, the oldest your reference values accept');
    // The statement expires 2026-12-02, 6.5 days after NOW.
    const long = await release(['verify', bundle, '--key', PUB, '--max-validity-days', '5']);
    expect(long.code).toBe(1);
    expect(long.stdout).toContain('FAIL release.validity — the manifest stays valid for 6.5 days from now (2026-11-25T12:00:00.000Z;');
    expect((await release(['verify', bundle, '--key', PUB, '--min-version', '0.1.0', '--max-validity-days', '7'])).code).toBe(0);
    expect((await release(['verify', bundle, '--key', PUB, '--min-version', 'latest'])).stderr).toMatch(
      /^sigil release: --min-version is a semantic version, e\.g\. 1\.2\.0\n/,
    );
  });

  it('verifies a real public-good bundle against the expected identity, offline, and reports it is no release manifest', async () => {
    const result = await release(['verify', REKOR_V2, '--identity', 'brian@dehamer.com', '--issuer', 'https://github.com/login/oauth']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('PASS release.tlog — the signature is in the pinned Sigstore transparency log (entry 544346)');
    expect(result.stdout).toContain('FAIL release.statement — the signed payload is of type text/plain');
  });

  it('refuses to verify without a named signer', async () => {
    const result = await release(['verify', REKOR_V2, '--identity', 'brian@dehamer.com']);
    expect(result.code).toBe(2);
    expect(result.stderr.split('\n')[0]).toBe(
      'sigil release: verify needs --key PUB.pem, or both --identity and --issuer: a manifest from an unnamed signer proves nothing',
    );
  });

  it('refuses to sign a statement that is not a release manifest, naming the field', async () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ ...releaseStatement(), predicateType: 'https://slsa.dev/provenance/v1' }));
    const result = await release(['sign', '--key', KEY, bad]);
    expect(result).toEqual({
      code: 3,
      stdout: '',
      stderr: `sigil release: ${bad} is not a Sigil release manifest: predicateType: must be https://sigil.dev/release-manifest/v1, got "https://slsa.dev/provenance/v1"\n`,
    });
  });

  it('refuses a signing key that is not EC P-256', async () => {
    const rsa = join(dir, 'rsa.key');
    writeFileSync(rsa, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const result = await release(['sign', '--key', rsa, STATEMENT]);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/^sigil release: signing key .*rsa\.key: the release signing key must be an EC P-256 private key/);
  });

  it('runs as `sigil release verify` from the command line', async () => {
    const bundle = join(dir, 'cli.sigstore.json');
    await release(['sign', '--key', KEY, '--out', bundle, STATEMENT]);
    const { stdout } = await promisify(execFile)(process.execPath, [
      ...SIGIL_FROM_SOURCES,
      'release',
      'verify',
      bundle,
      '--key',
      PUB,
      '--at',
      '2026-11-30T00:00:00Z',
    ]);
    expect(stdout.split('\n').at(-2)).toBe('verified with waivers: 7 checks passed; 1 waived (release.tlog)');
  });
});
