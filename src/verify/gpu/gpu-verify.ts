import { createHash, verify as verifySignature, X509Certificate } from 'node:crypto';
import { gpuEvidenceSha256, type GpuEvidence } from '../../protocol/attestation.ts';
import { fail, notPinned, pass, type Check } from '../check.ts';
import { commonName, issuanceProblem, sameCertificate } from '../evidence/certificate-chain.ts';
import { certificateFwid, readDeviceCertificates } from './device-certificates.ts';
import { describeGpuEvidenceError } from './errors.ts';
import { compareWithRims } from './measurements.ts';
import { NVIDIA_DEVICE_IDENTITY_ROOT } from './roots/nvidia-device-identity.ts';
import { NVIDIA_RIM_ROOT } from './roots/nvidia-rim-root.ts';
import { revocationCheck, type OcspBundle } from './ocsp.ts';
import { verifyRim, type Rim } from './rim.ts';
import { readSpdmMeasurementReport, type SpdmMeasurementReport } from './spdm-measurements.ts';

/** PEM roots a GPU verification trusts; giving them replaces the built-in NVIDIA roots. */
export interface GpuTrustRoots {
  /** Roots of GPU device certificate chains (NVIDIA Device Identity CA). */
  deviceIdentity: string[];
  /** Roots of RIM signing chains (NVIDIA CoRIM signing Root CA). */
  rim: string[];
}

export const DEFAULT_GPU_TRUST_ROOTS: GpuTrustRoots = { deviceIdentity: [NVIDIA_DEVICE_IDENTITY_ROOT], rim: [NVIDIA_RIM_ROOT] };

export interface VerifyGpuEvidenceOptions {
  /** The 32-byte nonce the verifier sent (hex or bytes); without it `gpu[i].nonce` fails: nothing shows freshness. */
  nonce?: string | Uint8Array;
  /** The RIMs (SWID tag XML text) the auditor obtained independently, e.g. `gpu.rims` of a reference file. */
  rims?: string[];
  /** The document's `binding.gpu_evidence_sha256`, checked against the entries when given. */
  boundSha256?: string[];
  roots?: GpuTrustRoots;
  /** The time certificates must be valid at (default now). */
  at?: Date;
  /** Recorded OCSP responses for the device and RIM signing chains (reference values gpu.ocsp); absent, revocation is not pinned. */
  ocsp?: OcspBundle;
  /** The auditor's waiver: a certificate no recorded response covers is waived, not failed (gpu.ocsp_allow_missing). */
  ocspAllowMissing?: boolean;
}

export interface GpuReportSummary {
  index: number;
  arch: string;
  driverVersion: string | null;
  vbiosVersion: string | null;
  /** Lowercase hex of each measurement, by NVIDIA's index (SPDM index - 1). */
  measurements: Record<number, string>;
}

export interface GpuEvidenceVerification {
  checks: Check[];
  /** One per entry whose report could be read. */
  gpus: GpuReportSummary[];
}

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

function expectedNonce(nonce: string | Uint8Array | undefined): Uint8Array | null {
  if (nonce === undefined) return null;
  return typeof nonce === 'string' ? Buffer.from(nonce, 'hex') : nonce;
}

function reportCheck(name: string, report: SpdmMeasurementReport): Check {
  const f = report.firmware;
  const active = report.blocks.filter((b) => b.value.some((byte) => byte !== 0)).length;
  const padding =
    report.trailingZeroBytes === 0
      ? ''
      : `; ${report.trailingZeroBytes} zero byte${report.trailingZeroBytes === 1 ? '' : 's'} after the signature (padding nobody signed) ignored`;
  return pass(
    name,
    `an SPDM 1.1 GET_MEASUREMENTS request and its signed answer: ${report.blocks.length} measurements (${active} non-zero); ` +
      `driver ${f.driverVersion ?? 'not stated'}, VBIOS ${f.vbiosVersion ?? 'not stated'}, project ${f.project ?? '?'}, project SKU ${f.projectSku ?? '?'}, chip SKU ${f.chipSku ?? '?'}${padding}`,
  );
}

function signatureCheck(name: string, report: SpdmMeasurementReport, leaf: X509Certificate): Check {
  const key = leaf.publicKey;
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'secp384r1') {
    return fail(name, `the device certificate ${commonName(leaf)} does not hold an ECDSA P-384 key, so it cannot have signed this report`);
  }
  let ok = false;
  try {
    ok = verifySignature('sha384', report.signedBytes, { key, dsaEncoding: 'ieee-p1363' }, report.signature);
  } catch {
    ok = false;
  }
  return ok
    ? pass(
        name,
        `the GPU's key (${commonName(leaf)}) signed the request and its answer (ECDSA P-384, SHA-384 over ${report.signedBytes.length} bytes): the measurements are the GPU's own`,
      )
    : fail(
        name,
        `the report's signature does not verify with the device certificate's key (${commonName(leaf)}): the report was changed or comes from another GPU`,
      );
}

/** A device chain starts at the GPU's own certificate (not a CA) and climbs to the root; anything else proves no GPU. */
function chainShapeProblem(certs: X509Certificate[]): string | null {
  const first = certs[0]!;
  if (certs.length === 1 && first.ca) {
    return `the chain holds 1 certificate (${commonName(first)}), a CA and no device certificate: a GPU chain runs from the device certificate up to the root`;
  }
  if (first.ca) return `the first certificate (${commonName(first)}) is a CA, not a device certificate: the GPU's own certificate is missing`;
  if (certs.length < 2) return `the chain holds only the device certificate (${commonName(first)}), not the CAs that link it to NVIDIA's root`;
  return null;
}

function chainChecks(prefix: string, certs: X509Certificate[], roots: string[], at: Date): Check[] {
  const shape = chainShapeProblem(certs);
  if (shape !== null) return [fail(`${prefix}.chain`, shape), fail(`${prefix}.root`, 'not checked: the chain has no device certificate')];
  for (let i = 0; i + 1 < certs.length; i++) {
    const problem = issuanceProblem(certs[i]!, certs[i + 1]!, at);
    if (problem !== null)
      return [fail(`${prefix}.chain`, `the device certificate chain is broken: ${problem}`), fail(`${prefix}.root`, 'not checked: the chain is broken')];
  }
  const chain = pass(`${prefix}.chain`, `${certs.map(commonName).join(' <- ')}: each certificate signed by the next and valid at ${at.toISOString()}`);
  const trusted = roots.map((pem) => new X509Certificate(pem));
  const last = certs[certs.length - 1]!;
  if (trusted.some((root) => sameCertificate(root, last))) {
    return [
      chain,
      pass(`${prefix}.root`, `the chain ends at ${commonName(last)}, byte for byte a trusted NVIDIA device root: a genuine NVIDIA GPU made this report`),
    ];
  }
  const issuer = trusted.find((root) => issuanceProblem(last, root, at) === null);
  return issuer !== undefined
    ? [chain, pass(`${prefix}.root`, `${commonName(last)} is signed by the trusted root ${commonName(issuer)}: a genuine NVIDIA GPU made this report`)]
    : [
        chain,
        fail(`${prefix}.root`, `the chain ends at ${commonName(last)}, which is not a trusted NVIDIA device root: nothing shows this is a genuine NVIDIA GPU`),
      ];
}

function fwidCheck(name: string, report: SpdmMeasurementReport, leaf: X509Certificate): Check {
  const reported = report.firmware.fwid;
  if (reported === null) return fail(name, 'the report states no FWID, so its firmware cannot be tied to the device certificate');
  let certified: Uint8Array | null;
  try {
    certified = certificateFwid(leaf);
  } catch (err) {
    return fail(name, describeGpuEvidenceError(err));
  }
  if (certified === null) return fail(name, `the device certificate ${commonName(leaf)} carries no SHA-384 FWID (TCG DICE TcbInfo extension)`);
  return Buffer.from(certified).equals(Buffer.from(reported))
    ? pass(
        name,
        `the FWID in the report equals the one in the device certificate (${hex(reported).slice(0, 16)}...): the firmware that answered is the one the certificate was issued to`,
      )
    : fail(
        name,
        `the report's FWID ${hex(reported).slice(0, 16)}... differs from the device certificate's ${hex(certified).slice(0, 16)}...: the answering firmware is not the certified one`,
      );
}

function nonceCheck(name: string, report: SpdmMeasurementReport, entry: GpuEvidence, expected: Uint8Array | null): Check {
  const requested = hex(report.request.nonce);
  if (entry.nonce.toLowerCase() !== requested) return fail(name, `the entry says nonce ${entry.nonce} but the signed request carries ${requested}`);
  if (expected === null)
    return fail(name, `not checked: no expected nonce given, so nothing shows the report (nonce ${requested}) was made just now rather than replayed`);
  return hex(expected) === requested
    ? pass(name, `the signed request carries your nonce ${requested}: the report was made for this verification, not replayed`)
    : fail(name, `the signed request carries nonce ${requested}, not yours (${hex(expected)}): the report is replayed or made for someone else`);
}

function rimSelection(name: string, kind: 'driver' | 'vbios', version: string | null, rims: Rim[]): { check: Check; rim?: Rim } {
  const what = kind === 'driver' ? 'driver' : 'VBIOS';
  if (version === null) return { check: fail(name, `the report states no ${what} version, so no RIM can be chosen for it`) };
  const candidates = rims.filter((r) => r.kind === kind);
  const rim = candidates.find((r) => r.version.toLowerCase() === version.toLowerCase());
  if (rim === undefined) {
    return {
      check: fail(name, `no verified RIM describes ${what} ${version} (verified ${what} RIMs: ${candidates.map((r) => r.version).join(', ') || 'none'})`),
    };
  }
  return { check: pass(name, `the ${rim.label}, signed by ${rim.signer}, describes the ${what} this GPU runs`), rim };
}

const boardName = (b: { project: string | null; projectSku: string | null; chipSku: string | null }): string =>
  `project ${b.project ?? '?'}, project SKU ${b.projectSku ?? '?'}, chip SKU ${b.chipSku ?? '?'}`;

function sameBoard(rim: Rim, report: SpdmMeasurementReport): boolean {
  const f = report.firmware;
  return (
    rim.board !== null &&
    rim.board.project === f.project?.toUpperCase() &&
    rim.board.projectSku === f.projectSku?.toUpperCase() &&
    rim.board.chipSku === f.chipSku?.toUpperCase()
  );
}

/** The VBIOS RIM for this version and this board: a RIM the RIM service made for another board is never chosen. */
function vbiosRimSelection(prefix: string, report: SpdmMeasurementReport, rims: Rim[]): { checks: Check[]; rim?: Rim } {
  const version = report.firmware.vbiosVersion;
  const forOtherBoards = rims.filter((r) => r.kind === 'vbios' && r.board !== null && !sameBoard(r, report));
  const eligible = rims.filter((r) => !forOtherBoards.includes(r));
  const selected = rimSelection(`${prefix}.vbios_rim`, 'vbios', version, eligible);
  if (selected.rim === undefined) {
    const sameVersion = forOtherBoards.filter((r) => version !== null && r.version.toLowerCase() === version.toLowerCase());
    if (sameVersion.length === 0) return { checks: [selected.check] };
    return {
      checks: [
        fail(
          `${prefix}.vbios_rim`,
          `no verified RIM describes VBIOS ${version} on ${boardName(report.firmware)} (RIMs of that version for other boards: ${sameVersion.map((r) => r.id).join(', ')})`,
        ),
      ],
    };
  }
  const rim = selected.rim;
  const board =
    rim.board === null
      ? notPinned(
          `${prefix}.vbios_board`,
          "the VBIOS RIM was given as bare SWID XML, which names no board: the board and SKU it was made for were not compared (give the RIM service's answer, NV_GPU_VBIOS_<project>_<SKU>_<chip>_<version>)",
        )
      : pass(`${prefix}.vbios_board`, `the VBIOS RIM ${rim.id} is for ${boardName(rim.board)}: this board`);
  return { checks: [selected.check, board], rim };
}

function measurementCheck(name: string, report: SpdmMeasurementReport, selected: (Rim | undefined)[]): Check {
  const rims = selected.filter((r): r is Rim => r !== undefined);
  if (rims.length < selected.length) return fail(name, 'not checked: a driver RIM and a VBIOS RIM matching the report are both needed');
  const result = compareWithRims(report.blocks, rims);
  if (result.conflicts.length > 0) return fail(name, `the RIMs both pin measurement indexes ${result.conflicts.join(', ')}, so they contradict each other`);
  if (result.mismatches.length > 0) {
    const first = result.mismatches.slice(0, 4).map((m) => `${m.index} (${m.rim}: ${m.reported === null ? 'not reported' : `${m.reported.slice(0, 12)}...`})`);
    return fail(
      name,
      `${result.mismatches.length} of ${result.compared.length} measurements differ from every value the RIMs allow, at indexes ${result.mismatches.map((m) => m.index).join(', ')}; first: ${first.join('; ')}: the GPU runs firmware NVIDIA did not sign for`,
    );
  }
  return pass(
    name,
    `all ${result.compared.length} measurements the RIMs pin equal one of their signed values: the GPU runs the driver and VBIOS NVIDIA published`,
  );
}

function wellFormed(entry: unknown): entry is GpuEvidence {
  if (typeof entry !== 'object' || entry === null) return false;
  const e = entry as Record<string, unknown>;
  return Number.isInteger(e.index) && ['arch', 'report', 'certificates', 'nonce'].every((k) => typeof e[k] === 'string');
}

function verifyEntry(
  entry: GpuEvidence,
  rims: Rim[],
  rimsGiven: boolean,
  expected: Uint8Array | null,
  roots: GpuTrustRoots,
  at: Date,
  options: VerifyGpuEvidenceOptions,
): { checks: Check[]; summary?: GpuReportSummary } {
  const prefix = `gpu[${entry.index}]`;
  let report: SpdmMeasurementReport;
  try {
    report = readSpdmMeasurementReport(Buffer.from(entry.report, 'base64'));
  } catch (err) {
    return { checks: [fail(`${prefix}.report`, `GPU ${entry.index} (${entry.arch}): the report cannot be read: ${describeGpuEvidenceError(err)}`)] };
  }
  const checks = [reportCheck(`${prefix}.report`, report)];
  let certs: X509Certificate[] | null = null;
  try {
    certs = readDeviceCertificates(Buffer.from(entry.certificates, 'base64').toString('latin1'));
    checks.push(pass(`${prefix}.certificates`, `${certs.length} certificates, the device's own first: ${commonName(certs[0]!)}`));
  } catch (err) {
    checks.push(fail(`${prefix}.certificates`, `the device certificate chain cannot be read: ${describeGpuEvidenceError(err)}`));
  }
  if (certs !== null) {
    checks.push(signatureCheck(`${prefix}.signature`, report, certs[0]!));
    checks.push(...chainChecks(prefix, certs, roots.deviceIdentity, at));
    checks.push(fwidCheck(`${prefix}.fwid`, report, certs[0]!));
  } else {
    for (const what of ['signature', 'chain', 'root', 'fwid']) checks.push(fail(`${prefix}.${what}`, 'not checked: no readable device certificate'));
  }
  checks.push(nonceCheck(`${prefix}.nonce`, report, entry, expected));
  if (rimsGiven) {
    const driver = rimSelection(`${prefix}.driver_rim`, 'driver', report.firmware.driverVersion, rims);
    const vbios = vbiosRimSelection(prefix, report, rims);
    checks.push(driver.check, ...vbios.checks, measurementCheck(`${prefix}.measurements`, report, [driver.rim, vbios.rim]));
  } else {
    checks.push(
      notPinned(
        `${prefix}.measurements`,
        `no RIMs given (reference values gpu.rims): the measurements of driver ${report.firmware.driverVersion ?? '?'} and VBIOS ${report.firmware.vbiosVersion ?? '?'} were compared with nothing`,
      ),
    );
  }
  // The first certificate is the GPU's own, issued by its firmware: NVIDIA's responder has no record of it, so NVIDIA's verifier asks about those above it.
  checks.push(
    certs === null
      ? fail(`${prefix}.revocation`, 'not checked: no readable device certificate')
      : revocationCheck(`${prefix}.revocation`, 'device certificate chain', certs.slice(1), { ...ocspOptions(options), at }),
  );
  const measurements: Record<number, string> = {};
  for (const b of report.blocks) measurements[b.index - 1] = hex(b.value);
  return {
    checks,
    summary: { index: entry.index, arch: entry.arch, driverVersion: report.firmware.driverVersion, vbiosVersion: report.firmware.vbiosVersion, measurements },
  };
}

const ocspOptions = (o: VerifyGpuEvidenceOptions) => ({
  ...(o.ocsp === undefined ? {} : { bundle: o.ocsp }),
  ...(o.ocspAllowMissing === undefined ? {} : { allowMissing: o.ocspAllowMissing }),
});

function bindingCheck(entries: GpuEvidence[], bound: string[]): Check {
  const actual = entries.map(gpuEvidenceSha256);
  const same = actual.length === bound.length && actual.every((h, i) => h === bound[i]?.toLowerCase());
  return same
    ? pass(
        'gpu.binding',
        `the binding lists the SHA-256 of each of the ${actual.length} GPU reports, in order: the CPU's hardware report vouches for exactly these GPU reports`,
      )
    : fail(
        'gpu.binding',
        `the binding lists ${bound.length} GPU report hashes that differ from the SHA-256 of the ${actual.length} reports given: these GPU reports are not the ones the CPU's report vouches for`,
      );
}

/**
 * What identifies a report however it is spelled: its bytes, without the zero padding after the signature that the
 * reader ignores (so a padded or re-encoded copy of one GPU's report is still that GPU's report).
 */
function reportIdentity(report: string): string {
  const bytes = Buffer.from(report, 'base64');
  let end = bytes.length;
  while (end > 0 && bytes[end - 1] === 0) end--;
  return bytes.subarray(0, end).toString('hex');
}

/**
 * Which GPU an entry's chain names: its identity certificate, the one NVIDIA's provisioning CA issued for this chip
 * at manufacture (second in the chain: it issues the firmware's own first certificate), by its public key, which
 * the chip alone holds. A fresh report from the same GPU has other bytes but this same certificate. Undefined when
 * the chain cannot be read (that entry fails its own checks).
 */
function deviceIdentity(entry: Partial<GpuEvidence>): { key: string; label: string } | undefined {
  if (typeof entry.certificates !== 'string') return undefined;
  try {
    const certs = readDeviceCertificates(Buffer.from(entry.certificates, 'base64').toString('latin1'));
    const identity = certs[1] ?? certs[0]!;
    const spki = identity.publicKey.export({ type: 'spki', format: 'der' });
    return { key: createHash('sha256').update(spki).digest('hex'), label: `${commonName(identity)} serial ${identity.serialNumber}` };
  } catch {
    return undefined;
  }
}

/** One entry per GPU: the same report twice, two reports from one GPU, or two entries with one index would count a GPU twice. */
function distinctEntriesCheck(entries: GpuEvidence[]): Check {
  const seenReport = new Map<string, number>();
  const seenDevice = new Map<string, number>();
  const seenIndex = new Set<unknown>();
  for (const [k, entry] of entries.entries()) {
    const e = entry as Partial<GpuEvidence>;
    const index = e.index ?? k;
    if (typeof e.report === 'string') {
      const identity = reportIdentity(e.report);
      const earlier = seenReport.get(identity);
      if (earlier !== undefined)
        return fail('gpu.evidence', `GPU entries ${earlier} and ${String(index)} carry the same report: one GPU would be counted twice`);
      seenReport.set(identity, index as number);
    }
    const device = deviceIdentity(e);
    if (device !== undefined) {
      const earlier = seenDevice.get(device.key);
      if (earlier !== undefined)
        return fail(
          'gpu.evidence',
          `GPU entries ${earlier} and ${String(index)} come from one GPU: both chains carry its identity certificate (${device.label}, issued by NVIDIA for one chip), so two reports of one GPU would count it twice`,
        );
      seenDevice.set(device.key, index as number);
    }
    if (seenIndex.has(index)) return fail('gpu.evidence', `two GPU entries claim index ${String(index)}: each GPU has its own index`);
    seenIndex.add(index);
  }
  return pass(
    'gpu.evidence',
    `${entries.length} GPU reports from ${entries.length} GPUs: each entry has its own index, its own report and its own GPU identity certificate`,
  );
}

/**
 * Verifies a document's GPU evidence offline, as NVIDIA's local verifier does and each step named: every GPU's SPDM
 * report, its signature by the device key, the chain to NVIDIA's Device Identity root, the FWID, the nonce, and its
 * measurements against the RIMs given (each RIM's own signature and chain checked first, once). Never throws.
 */
export function verifyGpuEvidence(entries: GpuEvidence[], options: VerifyGpuEvidenceOptions = {}): GpuEvidenceVerification {
  const roots = options.roots ?? DEFAULT_GPU_TRUST_ROOTS;
  const at = options.at ?? new Date();
  const checks: Check[] = [];
  if (options.boundSha256 !== undefined) checks.push(bindingCheck(entries, options.boundSha256));
  if (entries.length === 0) {
    checks.push(
      options.rims !== undefined && options.rims.length > 0
        ? fail(
            'gpu.evidence',
            'RIMs were given as reference values but the evidence holds no GPU report: nothing shows the GPUs run in confidential-computing mode',
          )
        : pass('gpu.evidence', 'the evidence holds no GPU report: it says nothing about any GPU the model may run on'),
    );
    return { checks, gpus: [] };
  }
  const rims: Rim[] = [];
  (options.rims ?? []).forEach((xml, k) => {
    const result = verifyRim(xml, { name: `gpu.rim[${k}]`, roots: roots.rim, at, ...ocspOptions(options) });
    checks.push(...result.checks);
    if (result.rim !== undefined) rims.push(result.rim);
  });
  if (entries.length > 1) checks.push(distinctEntriesCheck(entries));
  const expected = expectedNonce(options.nonce);
  const gpus: GpuReportSummary[] = [];
  for (const [k, entry] of entries.entries()) {
    if (!wellFormed(entry)) {
      checks.push(fail(`gpu[${k}].report`, 'the GPU evidence entry lacks an integer index or a string arch, report, certificates or nonce'));
      continue;
    }
    const result = verifyEntry(entry, rims, options.rims !== undefined && options.rims.length > 0, expected, roots, at, options);
    checks.push(...result.checks);
    if (result.summary !== undefined) gpus.push(result.summary);
  }
  return { checks, gpus };
}
