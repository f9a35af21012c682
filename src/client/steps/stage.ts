import type { brandHeaders } from '../../protocol/brand-headers.ts';
import type { Attested } from '../attest.ts';
import type { Exchange, ReceiptResult } from '../receipts.ts';
import type { AttestedSession } from '../session.ts';
import type { InclusionCheck } from './check-inclusion.ts';

/** What every step of one attested client reads: its session (the verdict, its connections) and the caller's choices. */
export interface ClientContext {
  session: AttestedSession;
  /** The service's base URL; requests go to its origin only. */
  base: URL;
  /**
   * Every request goes through an Oblivious HTTP relay, sealed whole to the attested gateway key: bodies are then not
   * sealed again with EHBP (the gateway serves what it opens as a request in the clear).
   */
  throughRelay: boolean;
  headerNames: ReturnType<typeof brandHeaders>;
  /** `throw`: a response whose receipt fails is an error; `report`: only recorded. */
  onInvalid: 'throw' | 'report';
  /** The largest answer held for its receipt check (a JSON body whole, a stream's bytes so far), in bytes. */
  maxAnswerBytes: number;
  /** Hold a JSON answer until the log proves it holds the answer's receipt; refuse it otherwise. */
  requireInclusion: boolean;
  inclusion: InclusionCheck;
  /** Keeps a receipt verdict and tells the caller's `onReceipt`. */
  record: (result: ReceiptResult) => void;
  onExchange: ((exchange: Exchange, result: ReceiptResult, attested: Attested) => void) | undefined;
}

/** A request as the app made it, read once: where it goes, what it carries, and the nonce its receipt must answer. */
export interface Prepared {
  url: URL;
  init: RequestInit;
  method: string;
  headers: Headers;
  body: Uint8Array | undefined;
  /** A POST asks for a receipt; every 2xx answer to it must carry one. */
  wantsReceipt: boolean;
  /** The app's own X-<Brand>-Nonce, honoured as sent. */
  ownNonce: string | undefined;
  nonce: string;
  /** The verdict the request goes out on. */
  attested: Attested;
  /** The body is sealed to the attested HPKE key (EHBP). */
  encrypts: boolean;
}

/** The answer, opened when it was sealed: what the receipt is checked over. `nonce` is the one the receipt must carry. */
export interface Answered extends Prepared {
  response: Response;
}
