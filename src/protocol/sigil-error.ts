/**
 * The root of every error the verifier, the measurement tool and the CLI throw (docs/architecture.md#errors).
 * Each family is a subclass with its own closed set of codes; `code` is stable (`ERR_RECEIPT_ALG`), so
 * callers branch on `err.code` or `instanceof`, never on the message. Errors a client of the server sees
 * are `HttpError` (src/protocol/errors.ts), which carries an OpenAI error code instead.
 */
export class SigilError<Code extends string = string> extends Error {
  readonly code: Code;

  constructor(code: Code, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

export function isSigilError(err: unknown): err is SigilError {
  return err instanceof SigilError;
}

/** A check's detail for a failure: the stable code first when the error has one, else the message alone. */
export function describeError(err: unknown): string {
  if (err instanceof SigilError) return `${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}
