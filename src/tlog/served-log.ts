/** A resource of /v1/log/ as a serving process sends it: its bytes and how they are typed and cached. */
export interface LogDocument {
  contentType: string;
  /** Absent for the proofs, which are computed per request. */
  cacheControl?: string;
  body: Uint8Array;
}

/**
 * The transparency log as a serving process uses it (docs/log.md): in one process the sequencer itself; in a worker the
 * primary's, over IPC (src/workers/shared-state.ts). Either way there is one log and one sequence of leaf indexes.
 */
export interface ServedLog {
  /** Appends SHA-256 of the receipt and gives its leaf index once the entry is on disk (in a worker, after one IPC round trip); a log that cannot hold it rejects with 503 log_unavailable. */
  append(jws: string, receiptId: string): number | Promise<number>;
  /** GET /v1/log/<resource>?<query>; a request the log cannot answer throws an HttpError of the catalogue (src/http/errors.ts). */
  read(resource: string, query: string): LogDocument | Promise<LogDocument>;
}
