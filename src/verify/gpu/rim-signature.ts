import { createHash, createPublicKey, verify as verifySignature, type BinaryLike, type KeyLike } from 'node:crypto';
import { C14nCanonicalization, createOptionalCallbackFunction, SignedXml, type HashAlgorithm, type SignatureAlgorithm } from 'xml-crypto';
import { GpuEvidenceError } from './errors.ts';

export const XMLDSIG_NS = 'http://www.w3.org/2000/09/xmldsig#';
export const C14N_11 = 'http://www.w3.org/2006/12/xml-c14n11';
export const ECDSA_SHA384 = 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384';
export const DIGEST_SHA384 = 'http://www.w3.org/2001/04/xmldsig-more#sha384';
export const ENVELOPED = 'http://www.w3.org/2000/09/xmldsig#enveloped-signature';

/**
 * Canonical XML 1.1 differs from 1.0 only in how xml:id and xml:base are inherited by a document subset. NVIDIA's
 * RIMs sign the whole document (URI "") and the RIM reader refuses any xml:* attribute, so 1.0's output is 1.1's.
 */
export class C14n11OverWholeDocument extends C14nCanonicalization {
  override getAlgorithmName(): 'http://www.w3.org/TR/2001/REC-xml-c14n-20010315' {
    return C14N_11 as 'http://www.w3.org/TR/2001/REC-xml-c14n-20010315';
  }
}

export class Sha384Digest implements HashAlgorithm {
  getHash(xml: string): string {
    return createHash('sha384').update(xml, 'utf8').digest('base64');
  }

  getAlgorithmName(): 'http://www.w3.org/2001/04/xmlenc#sha512' {
    return DIGEST_SHA384 as 'http://www.w3.org/2001/04/xmlenc#sha512';
  }
}

/** XML-DSig ECDSA (RFC 4051): SignatureValue is r || s, verified by node:crypto. This verifier never signs. */
export class EcdsaSha384Signature implements SignatureAlgorithm {
  verifySignature = createOptionalCallbackFunction((material: string, key: KeyLike, signatureValue: string): boolean => {
    try {
      return verifySignature(
        'sha384',
        Buffer.from(material, 'utf8'),
        { key: createPublicKey(key), dsaEncoding: 'ieee-p1363' },
        Buffer.from(signatureValue, 'base64'),
      );
    } catch {
      return false;
    }
  });

  getSignature = createOptionalCallbackFunction((_signedInfo: BinaryLike, _key: KeyLike): string => {
    throw new GpuEvidenceError('ERR_RIM_UNSUPPORTED', 'the RIM verifier does not sign');
  });

  getAlgorithmName(): 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512' {
    return ECDSA_SHA384 as 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512';
  }
}

/**
 * A SignedXml that knows NVIDIA's algorithms (C14N 1.1, SHA-384, ECDSA P-384) and nothing weaker: no RSA-SHA1,
 * no HMAC, no SHA-1 digests, so a RIM cannot choose a weaker algorithm than the one its key is for.
 */
export function rimSignedXml(publicKeyPem: string): SignedXml {
  const signed = new SignedXml({ publicCert: publicKeyPem });
  signed.CanonicalizationAlgorithms = {
    [C14N_11]: C14n11OverWholeDocument,
    'http://www.w3.org/TR/2001/REC-xml-c14n-20010315': C14nCanonicalization,
    [ENVELOPED]: signed.CanonicalizationAlgorithms[ENVELOPED]!,
  } as SignedXml['CanonicalizationAlgorithms'];
  signed.HashAlgorithms = { [DIGEST_SHA384]: Sha384Digest } as SignedXml['HashAlgorithms'];
  signed.SignatureAlgorithms = { [ECDSA_SHA384]: EcdsaSha384Signature } as SignedXml['SignatureAlgorithms'];
  return signed;
}
