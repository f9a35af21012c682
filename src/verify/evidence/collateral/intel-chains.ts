import { fail, pass } from '../../check.ts';
import { commonName, issuanceProblem, readPemCertificates, sameCertificate } from '../certificate-chain.ts';
import { describeEvidenceError, EvidenceError } from '../errors.ts';
import { iso, missing, revokedByRoot, trustedRoot, within, type IntelCollateralStage } from './intel-collateral-stage.ts';
import { crlSignedBy, isRevoked, readCrl } from './intel-crl.ts';

/**
 * The chains and CRLs of Intel's collateral (go-tdx-guest's first half): each certificate up to a built-in Intel SGX
 * Root CA at the stage's time, and not revoked by a CRL that is itself signed and current.
 */

/** The root CA's CRL, which revokes the intermediate CAs (TCB Signing, PCK Platform/Processor CA): signed by a built-in root and current. */
export async function checkRootCrl(s: IntelCollateralStage): Promise<void> {
  const { checks, collateral: c, intelRoots, at } = s;
  // Root CRL: revokes the intermediate CAs (TCB Signing, PCK Platform/Processor CA).
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
        s.rootCrl = crl;
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
}

/** The TCB signing chain: Intel SGX TCB Signing <- Intel SGX Root CA (built in), which signs the TCB info and the QE identity. */
export function checkTcbSigningChain(s: IntelCollateralStage): void {
  const { checks, collateral: c, intelRoots, at } = s;
  // The TCB signing chain: Intel SGX TCB Signing <- Intel SGX Root CA (built in).
  if (c.tcbSigningChain === undefined) checks.push(fail('collateral.tcb_signing_chain', missing('tcbSigningChain')));
  else {
    try {
      const chain = readPemCertificates(c.tcbSigningChain, 'TCB signing chain');
      const leaf = chain[0];
      if (leaf === undefined) throw new EvidenceError('ERR_COLLATERAL', 'tcb-signing-chain.pem holds no certificate');
      const root = trustedRoot(s, leaf);
      const problem =
        root === undefined ? (issuanceProblem(leaf, intelRoots[0] ?? leaf, at) ?? `${commonName(leaf)} is not issued by a built-in Intel root`) : null;
      const revoked = revokedByRoot(s, leaf);
      const topOk = chain.length < 2 || intelRoots.some((r) => sameCertificate(r, chain[chain.length - 1]!));
      if (commonName(leaf) !== 'Intel SGX TCB Signing')
        checks.push(fail('collateral.tcb_signing_chain', `the signing certificate is ${commonName(leaf)}, not Intel SGX TCB Signing`));
      else if (problem !== null)
        checks.push(fail('collateral.tcb_signing_chain', `${problem}: Intel's TCB info and QE identity cannot be trusted at this time`));
      else if (!topOk) checks.push(fail('collateral.tcb_signing_chain', 'the chain ends at a root that is not the built-in Intel SGX Root CA'));
      else if (revoked !== undefined)
        checks.push(fail('collateral.tcb_signing_chain', `the Intel SGX TCB Signing certificate was revoked on ${iso(revoked.revocationDate)}`));
      else {
        s.signing = leaf;
        checks.push(
          pass(
            'collateral.tcb_signing_chain',
            `Intel SGX TCB Signing <- Intel SGX Root CA (built in), valid at ${at.toISOString()} (until ${new Date(leaf.validTo).toISOString()})${s.rootCrl === undefined ? '' : ', not revoked'}`,
          ),
        );
      }
    } catch (err) {
      checks.push(fail('collateral.tcb_signing_chain', describeEvidenceError(err)));
    }
  }
}

/** The PCK CRL: the quote's PCK certificate, and its CA, not revoked. */
export async function checkPckCrl(s: IntelCollateralStage): Promise<void> {
  const { checks, collateral: c, pck, pckCa, at } = s;
  // PCK CRL: the PCK certificate in the quote must not be revoked.
  if (c.pckCrl === undefined || c.pckCrlIssuerChain === undefined)
    checks.push(fail('collateral.pck_crl', missing(c.pckCrl === undefined ? 'pckCrl' : 'pckCrlIssuerChain')));
  else if (pck === undefined) checks.push(fail('collateral.pck_crl', 'not checked: the quote has no readable PCK certificate'));
  else {
    try {
      const crl = readCrl(c.pckCrl, 'pck-crl.der');
      const issuer = readPemCertificates(c.pckCrlIssuerChain, 'PCK CRL issuer chain')[0];
      if (issuer === undefined) throw new EvidenceError('ERR_COLLATERAL', 'pck-crl-issuer-chain.pem holds no certificate');
      const issuerProblem = trustedRoot(s, issuer) === undefined ? `${commonName(issuer)} is not issued by a built-in Intel root at ${at.toISOString()}` : null;
      const caRevoked = revokedByRoot(s, issuer);
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
      if (pckCa !== undefined && revokedByRoot(s, pckCa) !== undefined)
        checks.push(fail('collateral.pck_ca', `${commonName(pckCa)} of the quote's chain was revoked by the root CA`));
    } catch (err) {
      checks.push(fail('collateral.pck_crl', describeEvidenceError(err)));
    }
  }
}

function nameCn(name: string): string {
  return (
    name
      .split('\n')
      .find((line) => line.startsWith('CN='))
      ?.slice(3) ?? name
  );
}
