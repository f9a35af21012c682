import type { X509Certificate } from 'node:crypto';
import type * as x509 from '@peculiar/x509';
import { fail, type Check } from '../../check.ts';
import { issuanceProblem, readCertificate, readPemCertificates } from '../certificate-chain.ts';
import { describeEvidenceError } from '../errors.ts';
import type { TdxTcbVerdict } from '../tdx-policy.ts';
import type { TdxQuote } from '../tdx-quote.ts';
import type { TrustRoots } from '../trust-roots.ts';
import { isRevoked } from './intel-crl.ts';
import type { TcbStatus } from '../../reference/reference-values.ts';
import { readPckExtension, type PckExtension } from './pck-extension.ts';
import type { TdxModuleStatus, TdxModuleTcbInfo } from './tdx-module.ts';

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

/** Intel's TCB info for one FMSPC (tcbinfo.json's `tcbInfo`), as far as the checks read it. */
export interface TcbComponent {
  svn: number;
}
export interface TcbLevel {
  tcb: { sgxtcbcomponents: TcbComponent[]; pcesvn: number; tdxtcbcomponents: TcbComponent[] };
  tcbDate: string;
  tcbStatus: string;
  advisoryIDs?: string[];
}
export interface TcbInfo extends TdxModuleTcbInfo {
  id: string;
  version: number;
  issueDate: string;
  nextUpdate: string;
  fmspc: string;
  pceId: string;
  tcbLevels: TcbLevel[];
}

/** The Quoting Enclave's TCB status and advisories, from its identity's level. */
export interface QeTcbStatus {
  status: TcbStatus;
  advisoryIds: string[];
}

/**
 * What the steps of the collateral check share (as src/http/pipeline's stage does): the inputs, the checks so far, and
 * what each step established for the next (a trusted root CRL, a trusted TCB signing certificate, trusted TCB info).
 */
export interface IntelCollateralStage {
  readonly quote: TdxQuote;
  readonly collateral: IntelCollateral;
  readonly at: Date;
  readonly intelRoots: readonly X509Certificate[];
  readonly checks: Check[];
  /** The quote's PCK certificate, its issuing CA, and the PCK certificate's Intel extension, when readable. */
  readonly pck: X509Certificate | undefined;
  readonly pckCa: X509Certificate | undefined;
  readonly pckExt: PckExtension | undefined;
  /** The root CA's CRL, once signed by a built-in root and current. */
  rootCrl?: x509.X509Crl;
  /** The Intel SGX TCB Signing certificate, once its chain is trusted. */
  signing?: X509Certificate;
  /** The TCB info, once signed, current and for this platform. */
  tcbInfo?: TcbInfo;
  moduleStatus?: TdxModuleStatus;
  /** The Quoting Enclave's status and advisories, once its identity is Intel's. */
  qe?: QeTcbStatus;
}

/** The stage before any step: the built-in roots read, and the quote's PCK chain (a PCK chain that cannot be read is a failed check). */
export function intelCollateralStage(quote: TdxQuote, collateral: IntelCollateral, roots: TrustRoots, at: Date): IntelCollateralStage {
  const checks: Check[] = [];
  const intelRoots = roots.intelRoots.map((pem, i) => readCertificate(pem, `built-in Intel root ${i}`));
  let pckChain: X509Certificate[] = [];
  let pckExt: PckExtension | undefined;
  try {
    pckChain = readPemCertificates(quote.pckChainPem, 'PCK chain');
    if (pckChain[0] !== undefined) pckExt = readPckExtension(pckChain[0]);
  } catch (err) {
    checks.push(fail('collateral.pck_certificate', describeEvidenceError(err)));
  }
  return { quote, collateral, at, intelRoots, checks, pck: pckChain[0], pckCa: pckChain[1], pckExt };
}

/** The built-in Intel root that issued `cert`, valid at the stage's time. */
export function trustedRoot(s: IntelCollateralStage, cert: X509Certificate): X509Certificate | undefined {
  return s.intelRoots.find((r) => issuanceProblem(cert, r, s.at) === null);
}

/** The root CRL's entry for `cert`, once the root CRL is trusted. */
export function revokedByRoot(s: IntelCollateralStage, cert: X509Certificate): x509.X509CrlEntry | undefined {
  return s.rootCrl === undefined ? undefined : isRevoked(s.rootCrl, cert);
}

export const missing = (name: keyof IntelCollateral) => `not checked: the bundle has no ${COLLATERAL_FILES[name]}`;

export function within(at: Date, from: Date, to: Date | undefined): boolean {
  return at >= from && (to === undefined || at <= to);
}

export function iso(d: Date | undefined): string {
  return d === undefined ? 'never' : d.toISOString();
}

export function untrusted(why: string): TdxTcbVerdict {
  return { status: null, advisoryIds: [], source: why };
}
