import { verify as verifySignature, type X509Certificate } from 'node:crypto';
import { fail, pass } from '../../check.ts';
import { TCB_STATUSES, type TcbStatus } from '../../reference/reference-values.ts';
import { toHex } from '../byte-reader.ts';
import { describeEvidenceError } from '../errors.ts';
import { iso, missing, within, type IntelCollateralStage, type TcbInfo } from './intel-collateral-stage.ts';
import { rawJsonMember } from './signed-json.ts';
import { tdxModuleCheck } from './tdx-module.ts';

/**
 * Intel's signed collateral (the TCB info and the QE identity): each signed by the trusted TCB signing certificate,
 * current at the stage's time, and about this platform and its Quoting Enclave.
 */

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

export function knownStatus(status: string): TcbStatus | undefined {
  return (TCB_STATUSES as readonly string[]).includes(status) ? (status as TcbStatus) : undefined;
}

function maskedEqual(actual: Uint8Array, expectedHex: string, maskHex: string): boolean {
  const expected = Buffer.from(expectedHex, 'hex');
  const mask = Buffer.from(maskHex, 'hex');
  if (expected.length !== actual.length || mask.length !== actual.length) return false;
  return actual.every((b, i) => (b & mask[i]!) === (expected[i]! & mask[i]!));
}

/** The TCB info: which TCB levels exist for this platform's FMSPC, and their status; and the TDX module's identity in it. */
export function checkTcbInfo(s: IntelCollateralStage): void {
  const { checks, collateral: c, signing, pckExt, quote, at } = s;
  // TCB info: which TCB levels exist for this FMSPC, and their status.
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
        s.tcbInfo = body;
        checks.push(
          pass(
            'collateral.tcb_info',
            `Intel's TDX TCB info for FMSPC ${body.fmspc} (evaluation ${String((body as unknown as { tcbEvaluationDataNumber?: number }).tcbEvaluationDataNumber ?? '?')}, ${body.tcbLevels.length} levels) is signed by Intel SGX TCB Signing and current at ${at.toISOString()} (next update ${body.nextUpdate})`,
          ),
        );
        const module = tdxModuleCheck(body, quote.body);
        checks.push(module.check);
        s.moduleStatus = module.status;
      }
    } catch (err) {
      checks.push(fail('collateral.tcb_info', describeEvidenceError(err)));
    }
  }
}

/** The QE identity: the Quoting Enclave that signed the attestation key must be Intel's, at a known TCB. */
export function checkQeIdentity(s: IntelCollateralStage): void {
  const { checks, collateral: c, signing, quote, at } = s;
  // QE identity: the Quoting Enclave that signed the attestation key must be Intel's, at a known TCB.
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
        const status = knownStatus(level.tcbStatus)!;
        s.qe = { status, advisoryIds: level.advisoryIDs ?? [] };
        const ok = status !== 'Revoked';
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
}
