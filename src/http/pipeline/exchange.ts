import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Caller } from '../../auth/bearer.ts';
import type { BudgetHold } from '../../limits/memory-budget.ts';
import type { EngineAbort, EngineResponse } from '../../proxy/engine-request.ts';
import type { Upstream } from '../../proxy/upstream.ts';
import type { SelectedModel } from '../../receipts/claims.ts';
import type { ReceiptRequest } from '../../receipts/request.ts';
import type { ChatRequest } from '../chat-request.ts';
import type { AppContext } from '../context.ts';
import type { EndpointDescription } from '../endpoints.ts';
import type { AccessLogLine } from '../access-log.ts';

/** Frees an exchange's slots and charges the tokens it used (the first call counts). */
export type Release = (tokensUsed: number) => void;

/**
 * One exchange on a relayed endpoint, as it stands after `begin` (docs/architecture.md#the-exchange-pipeline). One object
 * per exchange, made with every field in place: each step fills its own fields and returns the same object
 * under the type that says they are there (`ReadExchange`, `AdmittedExchange`, ...), so a step cannot read
 * what an earlier step has not yet made.
 */
export interface Exchange {
  readonly endpoint: EndpointDescription;
  /** `performance.now()` when the exchange began (before authentication), for the time to the first token. */
  readonly started: number;
  readonly ctx: AppContext;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly log: AccessLogLine;
  readonly caller: Caller;
  /** Whether receipts were asked for, and the nonce they bind (a sealed exchange's when the client sent none). */
  readonly receipt: ReceiptRequest;
  /** This exchange's charge on the memory budget (its body, its buffered answer), released when the response closes. */
  readonly hold: BudgetHold;
  /** Cancels the engine request when the response closes unfinished. */
  readonly abort: EngineAbort;
  /** Aborted when the shutdown grace ends: a stream still running is cut with one error event. */
  readonly streamsCut: AbortSignal;
  /** The response has closed (the client may leave at any step). */
  closed: boolean;
  /** The model receipt, once signed (sign.ts). */
  modelReceipt: Promise<string> | undefined;
  /** The transparency-log leaf index of the receipt last signed for this exchange (docs/log.md); undefined without a log. */
  logIndex: number | undefined;

  /** read: the request body (opened, when it came sealed). */
  raw: Buffer | undefined;
  /** read: an EHBP exchange, whose receipts travel in the sealed body, never in clear headers (docs/ehbp.md). */
  sealed: boolean | undefined;
  /** admit: gives the slots back, once the response closes. */
  release: Release | undefined;
  /** validate: the request, its model known and serving this endpoint. */
  chat: ChatRequest | undefined;
  /** validate: the engines to try, in order. */
  candidates: Upstream[] | undefined;
  /** validate: the receipt id, "" when no receipt was asked for. */
  receiptId: string | undefined;
  /** validate: the model as receipts name it. */
  selected: SelectedModel | undefined;
  /** validate: the catalogue id to write back into responses when the engine's name differs. */
  rewriteModel: string | undefined;
  /** validate, then forward: the bytes the engine gets (`raw`, or `raw` with only the model value and extension fields edited, salted per engine). */
  forwarded: Buffer | undefined;
  /** forward: the engine's answer, its status a success. */
  engine: EngineResponse | undefined;
}

export type ReadExchange = Exchange & { raw: Buffer; sealed: boolean };
export type AdmittedExchange = ReadExchange & { release: Release };
export type ValidExchange = AdmittedExchange & {
  chat: ChatRequest;
  candidates: Upstream[];
  receiptId: string;
  selected: SelectedModel;
  forwarded: Buffer;
};
export type ForwardedExchange = ValidExchange & { engine: EngineResponse };
