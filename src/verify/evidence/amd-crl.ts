import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import * as asn1js from 'asn1js';
import { constants, verify as verifySignature, type X509Certificate } from 'node:crypto';
import { fail, pass, waive } from '../check.ts';
import type { Check } from '../check.ts';
import type { SnpReferenceValues } from '../reference/reference-values.ts';
import { commonName } from './certificate-chain.ts';

/** Where the CRL came from, for the check's detail. */
export type AmdCrlSource = 'the collateral bundle (amd-crl.der)' | "the certificate table's CRL entry";

/** The chain the CRL is checked against: the trusted ARK that issued it and the ASK/ASVK it may revoke. */
export interface AmdCrlChain {
  ark: X509Certificate;
  intermediate: X509Certificate;
}

function readCrl(bytes: Uint8Array): x509.X509Crl {
  const text = Buffer.from(bytes).toString('latin1');
  return new x509.X509Crl(text.includes('-----BEGIN') ? text : Uint8Array.from(bytes));
}

/**
 * The CRL's signature under the ARK, with node's crypto: AMD signs with RSA-PSS SHA-384 (salt 48), and node has no
 * CRL API, so the exact signed bytes (tbsCertList) are taken from the DER by asn1js.
 */
function signedByArk(crl: x509.X509Crl, ark: X509Certificate): boolean {
  const parsed = asn1js.fromBER(new Uint8Array(crl.rawData));
  const tbs = parsed.offset === -1 ? undefined : (parsed.result as asn1js.Sequence).valueBlock.value[0];
  const alg = crl.signatureAlgorithm as { name: string; hash?: { name: string }; saltLength?: number };
  if (tbs === undefined || alg.name !== 'RSA-PSS' || alg.hash === undefined) return false;
  try {
    return verifySignature(
      alg.hash.name.replace('-', '').toLowerCase(),
      new Uint8Array(tbs.valueBeforeDecodeView),
      { key: ark.publicKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: alg.saltLength ?? 20 },
      new Uint8Array(crl.signature),
    );
  } catch {
    return false;
  }
}

const serialKey = (serial: string): string => serial.toLowerCase().replace(/^0+/, '');

/**
 * `snp.crl`: AMD's certificate revocation list for the product (KDS /vcek/v1/{product}/crl, signed by the ARK) is
 * signed by the chain's trusted ARK, current at `now`, and does not list the chain's ASK (or ASVK). The ARK revokes
 * only the certificates it issued; AMD retires VCEKs by TCB version instead (snp.min_tcb), as go-sev-guest notes.
 * No CRL fails, unless the reference values accept that (snp.allow_missing_crl: the check is then WAIVED).
 */
export function amdCrlCheck(
  crlBytes: Uint8Array | undefined,
  source: AmdCrlSource,
  chain: AmdCrlChain | undefined,
  now: Date,
  ref: SnpReferenceValues | undefined,
): Check {
  if (crlBytes === undefined) {
    const missing = fail(
      'snp.crl',
      "not checked: no AMD CRL was given (a collateral bundle's amd-crl.der, from `sigil collateral fetch`, or the certificate table's CRL entry), so a revoked AMD signing key would pass",
    );
    return ref?.allow_missing_crl === true
      ? waive(missing, 'snp.allow_missing_crl: the reference values accept evidence whose revocation was not checked')
      : missing;
  }
  if (chain === undefined) return fail('snp.crl', 'not checked: no trusted AMD chain to check the CRL against');
  let crl: x509.X509Crl;
  try {
    crl = readCrl(crlBytes);
  } catch (err) {
    return fail('snp.crl', `the AMD CRL from ${source} is not a CRL: ${(err as Error).message}`);
  }
  const ark = commonName(chain.ark);
  if (!signedByArk(crl, chain.ark))
    return fail('snp.crl', `the AMD CRL from ${source} (issuer ${crl.issuer}) is not signed by ${ark}: it was changed or is another product's`);
  const next = crl.nextUpdate;
  if (now < crl.thisUpdate || (next !== undefined && now > next)) {
    return fail(
      'snp.crl',
      `the AMD CRL is valid ${crl.thisUpdate.toISOString()} to ${next?.toISOString() ?? 'never'}, not at ${now.toISOString()}: fetch a current one (sigil collateral fetch)`,
    );
  }
  const intermediate = commonName(chain.intermediate);
  const revoked = crl.entries.find((e) => serialKey(e.serialNumber) === serialKey(chain.intermediate.serialNumber));
  if (revoked !== undefined) {
    return fail(
      'snp.crl',
      `${ark} revoked ${intermediate} (serial ${chain.intermediate.serialNumber.toLowerCase()}) on ${revoked.revocationDate.toISOString()}: keys it certified cannot be trusted`,
    );
  }
  return pass(
    'snp.crl',
    `${intermediate} (serial ${chain.intermediate.serialNumber.toLowerCase()}) is not among the ${crl.entries.length} certificate(s) ${ark} revoked (CRL from ${source}, signed by ${ark}, current at ${now.toISOString()}, next update ${next?.toISOString() ?? 'none'})`,
  );
}
