import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { verify as verifySignature, webcrypto, type X509Certificate } from 'node:crypto';
import { fail, pass } from '../../check.ts';
import type { Check } from '../../check.ts';
import { TCB_STATUSES, type TcbStatus } from '../../reference/reference-values.ts';
import { toHex } from '../byte-reader.ts';
import { commonName, issuanceProblem, readCertificate, readPemCertificates, sameCertificate } from '../certificate-chain.ts';
import { describeEvidenceError, EvidenceError } from '../errors.ts';
import type { TdxTcbVerdict } from '../tdx-policy.ts';
import type { TdxQuote } from '../tdx-quote.ts';
import type { TrustRoots } from '../trust-roots.ts';
import { readPckExtension, type PckExtension } from './pck-extension.ts';
import { rawJsonMember } from './signed-json.ts';
import { tdxModuleCheck, worseStatus, type TdxModuleStatus, type TdxModuleTcbInfo } from './tdx-module.ts';

/**
 * Intel's collateral for one TDX platform, as Intel PCS serves it (api.trustedservices.intel.com/tdx/certification/v4):
 * the bodies of /tcb and /qe/identity, their TCB-Info-Issuer-Chain header, /pckcrl with its issuer chain, and the
 * root CA CRL. Each is optional here so that a missing one is reported by name.
 */
export interface IntelCollateral {
  /** tcbinfo.json: `{"tcbInfo": {...}, "signature": "hex"}` exactly as served. */
  tcbInfo?: string;
  /** qeidentity.json: `{"enclaveIdentity": {...}, "signature": "hex"}` exactly as served. */
  qeIdentity?: string;
  /** tcb-signing-chain.pem: Intel SGX TCB Signing certificate, then the Intel SGX Root CA. */
  tcbSigningChain?: string;
  /** pck-crl.der: the CRL of the CA that issued the quote's PCK certificate (DER or PEM). */
  pckCrl?: Uint8Array;
  /** pck-crl-issuer-chain.pem: that CA, then the Intel SGX Root CA. */
  pckCrlIssuerChain?: string;
  /** root-crl.der: the Intel SGX Root CA's CRL (DER or PEM). */
  rootCrl?: Uint8Array;
}

/** The file names of a collateral bundle directory (`--collateral DIR`). */
export const COLLATERAL_FILES: Record<keyof IntelCollateral, string> = {
  tcbInfo: 'tcbinfo.json',
  qeIdentity: 'qeidentity.json',
  tcbSigningChain: 'tcb-signing-chain.pem',
  pckCrl: 'pck-crl.der',
  pckCrlIssuerChain: 'pck-crl-issuer-chain.pem',
  rootCrl: 'root-crl.der',
};

export interface CollateralResult {
  checks: Check[];
  /** Intel's verdict on this platform's TCB; status null when it could not be established, and why in `source`. */
  verdict: TdxTcbVerdict;
}

interface TcbComponent {
  svn: number;
}
interface TcbLevel {
  tcb: { sgxtcbcomponents: TcbComponent[]; pcesvn: number; tdxtcbcomponents: TcbComponent[] };
  tcbDate: string;
  tcbStatus: string;
  advisoryIDs?: string[];
}
interface TcbInfo extends TdxModuleTcbInfo {
  id: string;
  version: number;
  issueDate: string;
  nextUpdate: string;
  fmspc: string;
  pceId: string;
  tcbLevels: TcbLevel[];
}
interface QeIdentity {
  id: string;
  version: number;
  issueDate: string;
  nextUpdate: string;
  miscselect: string;
  miscselectMask: string;
  attributes: string;
  attributesMask: string;
  mrsigner: string;
  isvprodid: number;
  tcbLevels: Array<{ tcb: { isvsvn: number }; tcbDate: string; tcbStatus: string; advisoryIDs?: string[] }>;
}

const missing = (name: keyof IntelCollateral) => `not checked: the bundle has no ${COLLATERAL_FILES[name]}`;

function readCrl(bytes: Uint8Array, what: string): x509.X509Crl {
  try {
    const text = Buffer.from(bytes).toString('latin1');
    return new x509.X509Crl(text.includes('-----BEGIN') ? text : Uint8Array.from(bytes));
  } catch (err) {
    throw new EvidenceError('ERR_COLLATERAL', `${what} is not a CRL: ${(err as Error).message}`);
  }
}

function within(at: Date, from: Date, to: Date | undefined): boolean {
  return at >= from && (to === undefined || at <= to);
}

function iso(d: Date | undefined): string {
  return d === undefined ? 'never' : d.toISOString();
}

async function crlSignedBy(crl: x509.X509Crl, issuer: X509Certificate): Promise<boolean> {
  try {
    return await crl.verify({ publicKey: new x509.X509Certificate(Uint8Array.from(issuer.raw)) }, webcrypto as unknown as Crypto);
  } catch {
    return false;
  }
}

/** Serial numbers compare as lowercase hex without leading zeros. */
function serialKey(serial: string): string {
  return serial.toLowerCase().replace(/^0+/, '');
}

function isRevoked(crl: x509.X509Crl, cert: X509Certificate): x509.X509CrlEntry | undefined {
  return crl.entries.find((e) => serialKey(e.serialNumber) === serialKey(cert.serialNumber));
}

/** ECDSA P-256 SHA-256 over Intel's signed JSON member, signature as 64 bytes r||s in hex. */
function signedJson<T>(text: string, member: string, signer: X509Certificate): { body: T; signed: boolean } {
  const raw = rawJsonMember(text, member);
  const outer = JSON.parse(text) as Record<string, unknown>;
  const signature = typeof outer.signature === 'string' && /^[0-9a-fA-F]{128}$/.test(outer.signature) ? Buffer.from(outer.signature, 'hex') : undefined;
  let signed = false;
  if (signature !== undefined) {
    try {
      signed = verifySignature('sha256', Buffer.from(raw, 'utf8'), { key: signer.publicKey, dsaEncoding: 'ieee-p1363' }, signature);
    } catch {
      signed = false;
    }
  }
  return { body: JSON.parse(raw) as T, signed };
}

function knownStatus(status: string): TcbStatus | undefined {
  return (TCB_STATUSES as readonly string[]).includes(status) ? (status as TcbStatus) : undefined;
}

/**
 * Intel's TCB level matching for TDX (Intel TDX DCAP Quote Verification, "TCB level determination"): the first level,
 * in the order Intel lists them, whose SGX components and PCESVN the PCK certificate meets and whose TDX components
 * the quote's TEE_TCB_SVN meets.
 */
export function matchTdxTcbLevel(levels: readonly TcbLevel[], pck: Pick<PckExtension, 'compSvn' | 'pceSvn'>, teeTcbSvn: Uint8Array): TcbLevel | undefined {
  return levels.find(
    (level) =>
      level.tcb.sgxtcbcomponents.every((c, i) => (pck.compSvn[i] ?? 0) >= c.svn) &&
      pck.pceSvn >= level.tcb.pcesvn &&
      level.tcb.tdxtcbcomponents.every((c, i) => (teeTcbSvn[i] ?? 0) >= c.svn),
  );
}

/** Intel's convergence of the platform's and the Quoting Enclave's status: an out-of-date QE makes the platform out of date. */
function converge(platform: TcbStatus, qe: TcbStatus | undefined): TcbStatus {
  if (qe === undefined || qe === 'UpToDate' || qe === 'SWHardeningNeeded' || qe === 'ConfigurationNeeded' || qe === 'ConfigurationAndSWHardeningNeeded')
    return platform;
  if (qe === 'Revoked' || platform === 'Revoked') return 'Revoked';
  if (platform === 'ConfigurationNeeded' || platform === 'ConfigurationAndSWHardeningNeeded' || platform === 'OutOfDateConfigurationNeeded')
    return 'OutOfDateConfigurationNeeded';
  return 'OutOfDate';
}

function maskedEqual(actual: Uint8Array, expectedHex: string, maskHex: string): boolean {
  const expected = Buffer.from(expectedHex, 'hex');
  const mask = Buffer.from(maskHex, 'hex');
  if (expected.length !== actual.length || mask.length !== actual.length) return false;
  return actual.every((b, i) => (b & mask[i]!) === (expected[i]! & mask[i]!));
}

/**
 * Verifies Intel's collateral offline at `at` against the built-in Intel SGX Root CA, and from it Intel's verdict on
 * the quote's platform: the root CRL, the TCB signing chain, the TCB info (signature, validity, FMSPC from the PCK
 * certificate, TDX module identity), the QE identity (signature, validity, the QE report against it), the PCK CRL
 * (signature, validity, the PCK certificate not revoked), then the TCB level for the PCK's and the quote's SVNs.
 */
export async function verifyIntelCollateral(quote: TdxQuote, c: IntelCollateral, roots: TrustRoots, at: Date): Promise<CollateralResult> {
  const checks: Check[] = [];
  const intelRoots = roots.intelRoots.map((pem, i) => readCertificate(pem, `built-in Intel root ${i}`));
  const untrusted = (why: string): TdxTcbVerdict => ({ status: null, advisoryIds: [], source: why });
  let pckChain: X509Certificate[] = [];
  let pckExt: PckExtension | undefined;
  try {
    pckChain = readPemCertificates(quote.pckChainPem, 'PCK chain');
    if (pckChain[0] !== undefined) pckExt = readPckExtension(pckChain[0]);
  } catch (err) {
    checks.push(fail('collateral.pck_certificate', describeEvidenceError(err)));
  }
  const pck = pckChain[0];
  const pckCa = pckChain[1];
  const trustedRoot = (cert: X509Certificate) => intelRoots.find((r) => issuanceProblem(cert, r, at) === null);

  // Root CRL: revokes the intermediate CAs (TCB Signing, PCK Platform/Processor CA).
  let rootCrl: x509.X509Crl | undefined;
  if (c.rootCrl === undefined) checks.push(fail('collateral.root_crl', missing('rootCrl')));
  else {
    try {
      const crl = readCrl(c.rootCrl, 'root-crl.der');
      const signed = (await Promise.all(intelRoots.map((r) => crlSignedBy(crl, r)))).some(Boolean);
      if (!signed) checks.push(fail('collateral.root_crl', `the root CRL (issuer ${crl.issuer}) is not signed by a built-in Intel SGX Root CA`));
      else if (!within(at, crl.thisUpdate, crl.nextUpdate))
        checks.push(
          fail(
            'collateral.root_crl',
            `the root CRL is valid ${iso(crl.thisUpdate)} to ${iso(crl.nextUpdate)}, not at ${at.toISOString()}: fetch a current one`,
          ),
        );
      else {
        rootCrl = crl;
        checks.push(
          pass(
            'collateral.root_crl',
            `the Intel SGX Root CA's CRL (${crl.entries.length} revoked, next update ${iso(crl.nextUpdate)}) is signed by the built-in root and current at ${at.toISOString()}`,
          ),
        );
      }
    } catch (err) {
      checks.push(fail('collateral.root_crl', describeEvidenceError(err)));
    }
  }
  const revokedByRoot = (cert: X509Certificate) => (rootCrl === undefined ? undefined : isRevoked(rootCrl, cert));

  // The TCB signing chain: Intel SGX TCB Signing <- Intel SGX Root CA (built in).
  let signing: X509Certificate | undefined;
  if (c.tcbSigningChain === undefined) checks.push(fail('collateral.tcb_signing_chain', missing('tcbSigningChain')));
  else {
    try {
      const chain = readPemCertificates(c.tcbSigningChain, 'TCB signing chain');
      const leaf = chain[0];
      if (leaf === undefined) throw new EvidenceError('ERR_COLLATERAL', 'tcb-signing-chain.pem holds no certificate');
      const root = trustedRoot(leaf);
      const problem =
        root === undefined ? (issuanceProblem(leaf, intelRoots[0] ?? leaf, at) ?? `${commonName(leaf)} is not issued by a built-in Intel root`) : null;
      const revoked = revokedByRoot(leaf);
      const topOk = chain.length < 2 || intelRoots.some((r) => sameCertificate(r, chain[chain.length - 1]!));
      if (commonName(leaf) !== 'Intel SGX TCB Signing')
        checks.push(fail('collateral.tcb_signing_chain', `the signing certificate is ${commonName(leaf)}, not Intel SGX TCB Signing`));
      else if (problem !== null)
        checks.push(fail('collateral.tcb_signing_chain', `${problem}: Intel's TCB info and QE identity cannot be trusted at this time`));
      else if (!topOk) checks.push(fail('collateral.tcb_signing_chain', 'the chain ends at a root that is not the built-in Intel SGX Root CA'));
      else if (revoked !== undefined)
        checks.push(fail('collateral.tcb_signing_chain', `the Intel SGX TCB Signing certificate was revoked on ${iso(revoked.revocationDate)}`));
      else {
        signing = leaf;
        checks.push(
          pass(
            'collateral.tcb_signing_chain',
            `Intel SGX TCB Signing <- Intel SGX Root CA (built in), valid at ${at.toISOString()} (until ${new Date(leaf.validTo).toISOString()})${rootCrl === undefined ? '' : ', not revoked'}`,
          ),
        );
      }
    } catch (err) {
      checks.push(fail('collateral.tcb_signing_chain', describeEvidenceError(err)));
    }
  }

  // TCB info: which TCB levels exist for this FMSPC, and their status.
  let tcbInfo: TcbInfo | undefined;
  let moduleStatus: TdxModuleStatus | undefined;
  if (c.tcbInfo === undefined) checks.push(fail('collateral.tcb_info', missing('tcbInfo')));
  else if (signing === undefined) checks.push(fail('collateral.tcb_info', 'not checked: no trusted TCB signing certificate'));
  else {
    try {
      const { body, signed } = signedJson<TcbInfo>(c.tcbInfo, 'tcbInfo', signing);
      const from = new Date(body.issueDate);
      const to = new Date(body.nextUpdate);
      if (!signed)
        checks.push(fail('collateral.tcb_info', 'the TCB info signature does not verify with the Intel SGX TCB Signing key: it was changed or forged'));
      else if (body.id !== 'TDX' || body.version < 3)
        checks.push(fail('collateral.tcb_info', `the TCB info is ${body.id} version ${body.version}, not TDX version 3 or later`));
      else if (!within(at, from, to))
        checks.push(fail('collateral.tcb_info', `the TCB info is valid ${iso(from)} to ${iso(to)}, not at ${at.toISOString()}: fetch a current one`));
      else if (pckExt === undefined) checks.push(fail('collateral.tcb_info', 'not checked: the PCK certificate carries no readable FMSPC'));
      else if (body.fmspc.toLowerCase() !== pckExt.fmspc || body.pceId.toLowerCase() !== pckExt.pceId) {
        checks.push(
          fail(
            'collateral.tcb_info',
            `the TCB info is for FMSPC ${body.fmspc} (PCE ${body.pceId}) but the PCK certificate says ${pckExt.fmspc} (PCE ${pckExt.pceId}): it describes another platform`,
          ),
        );
      } else {
        tcbInfo = body;
        checks.push(
          pass(
            'collateral.tcb_info',
            `Intel's TDX TCB info for FMSPC ${body.fmspc} (evaluation ${String((body as unknown as { tcbEvaluationDataNumber?: number }).tcbEvaluationDataNumber ?? '?')}, ${body.tcbLevels.length} levels) is signed by Intel SGX TCB Signing and current at ${at.toISOString()} (next update ${body.nextUpdate})`,
          ),
        );
        const module = tdxModuleCheck(body, quote.body);
        checks.push(module.check);
        moduleStatus = module.status;
      }
    } catch (err) {
      checks.push(fail('collateral.tcb_info', describeEvidenceError(err)));
    }
  }

  // QE identity: the Quoting Enclave that signed the attestation key must be Intel's, at a known TCB.
  let qeStatus: TcbStatus | undefined;
  let qeAdvisories: string[] = [];
  if (c.qeIdentity === undefined) checks.push(fail('collateral.qe_identity', missing('qeIdentity')));
  else if (signing === undefined) checks.push(fail('collateral.qe_identity', 'not checked: no trusted TCB signing certificate'));
  else {
    try {
      const { body, signed } = signedJson<QeIdentity>(c.qeIdentity, 'enclaveIdentity', signing);
      const from = new Date(body.issueDate);
      const to = new Date(body.nextUpdate);
      const qe = quote.qeReport;
      const misc = Buffer.alloc(4);
      misc.writeUInt32LE(qe.miscSelect);
      const level = body.tcbLevels.find((l) => qe.isvSvn >= l.tcb.isvsvn);
      if (!signed)
        checks.push(fail('collateral.qe_identity', 'the QE identity signature does not verify with the Intel SGX TCB Signing key: it was changed or forged'));
      else if (body.id !== 'TD_QE') checks.push(fail('collateral.qe_identity', `the QE identity is for ${body.id}, not TD_QE`));
      else if (!within(at, from, to))
        checks.push(fail('collateral.qe_identity', `the QE identity is valid ${iso(from)} to ${iso(to)}, not at ${at.toISOString()}: fetch a current one`));
      else if (toHex(qe.mrSigner) !== body.mrsigner.toLowerCase() || qe.isvProdId !== body.isvprodid) {
        checks.push(
          fail(
            'collateral.qe_identity',
            `the Quoting Enclave (MRSIGNER ${toHex(qe.mrSigner).slice(0, 16)}..., product ${qe.isvProdId}) is not Intel's TD QE (MRSIGNER ${body.mrsigner.slice(0, 16).toLowerCase()}..., product ${body.isvprodid})`,
          ),
        );
      } else if (
        !maskedEqual(new Uint8Array(misc.reverse()), body.miscselect, body.miscselectMask) ||
        !maskedEqual(qe.attributes, body.attributes, body.attributesMask)
      ) {
        checks.push(
          fail('collateral.qe_identity', "the Quoting Enclave's MISCSELECT or ATTRIBUTES differ from Intel's QE identity (a debug QE, for instance)"),
        );
      } else if (level === undefined || knownStatus(level.tcbStatus) === undefined) {
        checks.push(fail('collateral.qe_identity', `no TCB level of the QE identity covers the QE's ISV SVN ${qe.isvSvn}`));
      } else {
        qeStatus = knownStatus(level.tcbStatus);
        qeAdvisories = level.advisoryIDs ?? [];
        const ok = qeStatus !== 'Revoked';
        checks.push(
          (ok ? pass : fail)(
            'collateral.qe_identity',
            `the Quoting Enclave is Intel's TD QE (ISV SVN ${qe.isvSvn}, status ${level.tcbStatus} since ${level.tcbDate}); the QE identity is signed by Intel SGX TCB Signing and current at ${at.toISOString()}`,
          ),
        );
      }
    } catch (err) {
      checks.push(fail('collateral.qe_identity', describeEvidenceError(err)));
    }
  }

  // PCK CRL: the PCK certificate in the quote must not be revoked.
  if (c.pckCrl === undefined || c.pckCrlIssuerChain === undefined)
    checks.push(fail('collateral.pck_crl', missing(c.pckCrl === undefined ? 'pckCrl' : 'pckCrlIssuerChain')));
  else if (pck === undefined) checks.push(fail('collateral.pck_crl', 'not checked: the quote has no readable PCK certificate'));
  else {
    try {
      const crl = readCrl(c.pckCrl, 'pck-crl.der');
      const issuer = readPemCertificates(c.pckCrlIssuerChain, 'PCK CRL issuer chain')[0];
      if (issuer === undefined) throw new EvidenceError('ERR_COLLATERAL', 'pck-crl-issuer-chain.pem holds no certificate');
      const issuerProblem = trustedRoot(issuer) === undefined ? `${commonName(issuer)} is not issued by a built-in Intel root at ${at.toISOString()}` : null;
      const caRevoked = revokedByRoot(issuer);
      const entry = isRevoked(crl, pck);
      if (issuerProblem !== null) checks.push(fail('collateral.pck_crl', issuerProblem));
      else if (caRevoked !== undefined)
        checks.push(fail('collateral.pck_crl', `${commonName(issuer)} was revoked by the root CA on ${iso(caRevoked.revocationDate)}`));
      else if (!(await crlSignedBy(crl, issuer))) checks.push(fail('collateral.pck_crl', `the PCK CRL is not signed by ${commonName(issuer)}`));
      else if (!within(at, crl.thisUpdate, crl.nextUpdate))
        checks.push(
          fail('collateral.pck_crl', `the PCK CRL is valid ${iso(crl.thisUpdate)} to ${iso(crl.nextUpdate)}, not at ${at.toISOString()}: fetch a current one`),
        );
      else if (pck.issuer !== issuer.subject)
        checks.push(
          fail('collateral.pck_crl', `the PCK CRL is ${commonName(issuer)}'s, but the PCK certificate was issued by ${nameCn(pck.issuer)}: give that CA's CRL`),
        );
      else if (entry !== undefined)
        checks.push(
          fail(
            'collateral.pck_crl',
            `the PCK certificate (serial ${pck.serialNumber.toLowerCase()}) was revoked on ${iso(entry.revocationDate)}: this platform's attestation key is not trusted`,
          ),
        );
      else
        checks.push(
          pass(
            'collateral.pck_crl',
            `the PCK certificate (serial ${pck.serialNumber.toLowerCase().slice(0, 16)}...) is not among the ${crl.entries.length} certificates ${commonName(issuer)} revoked (CRL signed, current at ${at.toISOString()})`,
          ),
        );
      if (pckCa !== undefined && revokedByRoot(pckCa) !== undefined)
        checks.push(fail('collateral.pck_ca', `${commonName(pckCa)} of the quote's chain was revoked by the root CA`));
    } catch (err) {
      checks.push(fail('collateral.pck_crl', describeEvidenceError(err)));
    }
  }

  // The verdict: only from TCB info that passed every check above.
  if (tcbInfo === undefined || pckExt === undefined) return { checks, verdict: untrusted('no trusted TCB info for this platform') };
  const level = matchTdxTcbLevel(tcbInfo.tcbLevels, pckExt, quote.body.teeTcbSvn);
  const where = `Intel's TCB info for FMSPC ${tcbInfo.fmspc}`;
  if (level === undefined) {
    return {
      checks,
      verdict: untrusted(
        `no TCB level of ${where} is met by this platform (PCK SGX components ${pckExt.compSvn.join('.')}, PCESVN ${pckExt.pceSvn}, TEE_TCB_SVN ${toHex(quote.body.teeTcbSvn)}): its TCB is older than any Intel supports`,
      ),
    };
  }
  const platform = knownStatus(level.tcbStatus);
  if (platform === undefined) return { checks, verdict: untrusted(`${where} gives the unknown status ${JSON.stringify(level.tcbStatus)}`) };
  const converged = converge(platform, qeStatus);
  // The TDX module's own status counts too (Intel's QVL, dcap-qvl): the worse one wins.
  const status = moduleStatus === undefined ? converged : worseStatus(converged, moduleStatus.status);
  const advisoryIds = [...new Set([...(level.advisoryIDs ?? []), ...qeAdvisories, ...(moduleStatus?.advisoryIds ?? [])])];
  const notes = [
    ...(converged === platform ? [] : [`platform ${platform}, Quoting Enclave ${qeStatus}`]),
    ...(moduleStatus === undefined || status === converged ? [] : [`${moduleStatus.source}: ${moduleStatus.status}`]),
  ];
  const qeNote = notes.length === 0 ? '' : ` (${notes.join('; ')})`;
  const evaluation = (tcbInfo as unknown as { tcbEvaluationDataNumber?: unknown }).tcbEvaluationDataNumber;
  const verdict: TdxTcbVerdict = { status, advisoryIds, source: `${where}, TCB level of ${level.tcbDate.slice(0, 10)}${qeNote}` };
  if (typeof evaluation === 'number') verdict.evaluationDataNumber = evaluation;
  return { checks, verdict };
}

function nameCn(name: string): string {
  return (
    name
      .split('\n')
      .find((line) => line.startsWith('CN='))
      ?.slice(3) ?? name
  );
}
