import { generateKeyPairSync } from 'node:crypto';
import { IN_TOTO_STATEMENT_TYPE, RELEASE_PREDICATE_TYPE, type ReleaseStatement } from '../../src/verify/release/manifest.ts';
import { signReleaseWithKey } from '../../src/verify/release/sign-with-key.ts';

export const SNP_MEASUREMENT = '5d'.repeat(48);
export const TDX_MRTD = '7d'.repeat(48);
export const TDX_RTMR1 = '11'.repeat(48);
export const TDX_RTMR1_OTHER = '12'.repeat(48);

const OVMF = { name: 'OVMF edk2-stable202502 (AMD SEV)', sha384: 'a1'.repeat(48), source: 'built from the recipe in image/ (docs/image.md)' };
const TDVF = { name: 'TDVF edk2-stable202502', sha384: 'b2'.repeat(48), source: 'built from the recipe in image/ (docs/image.md)' };

/** A release statement with one SEV-SNP shape and two TDX shapes that differ in RTMR1; expires 2026-12-02. */
export function releaseStatement(): ReleaseStatement {
  return {
    _type: IN_TOTO_STATEMENT_TYPE,
    subject: [{ name: 'sigil-image-0.1.0.squashfs', digest: { sha256: 'cd'.repeat(32) } }],
    predicateType: RELEASE_PREDICATE_TYPE,
    predicate: {
      version: '0.1.0',
      expires: '2026-12-02T00:00:00Z',
      image: { root_hash: 'ab'.repeat(32) },
      sigil_self_measurement: '5e'.repeat(48),
      targets: [
        {
          platform: 'sev-snp',
          shape: { vmm: 'QEMU', vcpus: 4, vcpu_type: 'EPYC-v4', guest_features: '0x1' },
          firmware: OVMF,
          measurements: { measurement: SNP_MEASUREMENT },
        },
        {
          platform: 'tdx',
          shape: { vcpus: 4, memory: '16G' },
          firmware: TDVF,
          measurements: { mrtd: TDX_MRTD, rtmr0: '00'.repeat(48), rtmr1: TDX_RTMR1, rtmr2: '22'.repeat(48) },
        },
        {
          platform: 'tdx',
          shape: { vcpus: 8, memory: '32G' },
          firmware: TDVF,
          measurements: { mrtd: TDX_MRTD, rtmr0: '00'.repeat(48), rtmr1: TDX_RTMR1_OTHER, rtmr2: '22'.repeat(48) },
        },
      ],
    },
  };
}

/**
 * A locally keyed release bundle whose only target is one SEV-SNP shape measuring `snpMeasurement`, expiring at
 * `expires`; its self-measurement is `selfMeasurement` (default: releaseStatement's; a test against a running
 * Sigil gives the manifest it measures, TeeSigil.manifest); its version 0.1.0 unless `version`. With `tamperedTo`, the bundle is changed after
 * signing to list that measurement instead (tamperedRelease).
 */
export function keyedSnpRelease(
  snpMeasurement: string,
  expires: Date,
  options: { selfMeasurement?: string; tamperedTo?: string; version?: string } = {},
): { bundle: string; publicKeyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const statement = releaseStatement();
  if (options.version !== undefined) statement.predicate.version = options.version;
  statement.predicate.expires = expires.toISOString().replace(/\.\d+Z$/, 'Z');
  statement.predicate.sigil_self_measurement = options.selfMeasurement ?? '5e'.repeat(48);
  statement.predicate.targets = [{ ...statement.predicate.targets[0]!, measurements: { measurement: snpMeasurement } }];
  const bundle = signReleaseWithKey(statement, privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
  return {
    bundle: options.tamperedTo === undefined ? bundle : tamperedRelease(bundle, options.tamperedTo),
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

/** The command-line flags naming a keyed release (`--release FILE --key FILE`), its files written by `save` under `name`. */
export function releaseFlags(release: { bundle: string; publicKeyPem: string }, name: string, save: (file: string, text: string) => string): string[] {
  return ['--release', save(`${name}.sigstore.json`, release.bundle), '--key', save(`${name}.pub.pem`, release.publicKeyPem)];
}

/** The bundle with its signed payload changed after signing: the measurement replaced by `measurement`. */
export function tamperedRelease(bundle: string, measurement: string): string {
  const doc = JSON.parse(bundle) as { dsseEnvelope: { payload: string } };
  const payload = JSON.parse(Buffer.from(doc.dsseEnvelope.payload, 'base64').toString('utf8')) as ReleaseStatement;
  payload.predicate.targets[0]!.measurements = { measurement };
  doc.dsseEnvelope.payload = Buffer.from(JSON.stringify(payload)).toString('base64');
  return JSON.stringify(doc);
}
