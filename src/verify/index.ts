/** The client-side verifier's public API: importable on its own, with nothing from the server side. */
export { fail, pass } from './check.ts';
export type { Check } from './check.ts';
export { RECEIPT_SCHEMA_VERSION, receiptShapeProblems } from './claims.ts';
export type { ReceiptClaims, SelectedModel, Tee } from './claims.ts';
export { canonicalJson, canonicalPolicyHash, sha256Tagged } from './digest.ts';
export { VERIFY_ERROR_CODES, VerifyError, isVerifyError } from './errors.ts';
export type { VerifyErrorCode } from './errors.ts';
export { P256_ORDER, assertEs256SignatureEncoding, verifyEs256 } from './es256.ts';
export { importJwks } from './jwks.ts';
export type { EcPublicJwk, ImportedJwks, SkippedKey, VerificationKey } from './jwks.ts';
export { verifyCompactJws } from './jws.ts';
export type { ProtectedHeader, VerifiedJws } from './jws.ts';
export { NO_TEE_DETAIL, verifyReceipt } from './receipt.ts';
export type { ReceiptExpectations, ReceiptVerification, VerifyReceiptOptions } from './receipt.ts';
