import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseAddCheckpoint, TLOG_SIZE_TYPE } from '../protocol/tlog/add-checkpoint.ts';
import { parseCheckpoint } from '../protocol/tlog/checkpoint.ts';
import { verifyConsistency } from '../protocol/tlog/merkle.ts';
import { openNote, type NoteVerifier } from '../protocol/tlog/note.ts';
import type { WitnessKey } from './witness-key.ts';
import type { WitnessState } from './witness-state.ts';

export interface WitnessServiceOptions {
  key: WitnessKey;
  state: WitnessState;
  /** The logs this witness follows: each origin and a key (type 0x01) it trusts for it. */
  logs: Array<{ origin: string; key: NoteVerifier }>;
  /** Seconds since the epoch, for the cosignature's timestamp. */
  now?: () => number;
  onCosigned?: (origin: string, size: number) => void;
}

/** An add-checkpoint body is an old size, at most 63 hashes and a checkpoint: 64 KiB is ample. */
const MAX_BODY = 64 * 1024;

interface Answer {
  status: number;
  type: string;
  body: string;
}

const text = (status: number, body: string): Answer => ({ status, type: 'text/plain; charset=utf-8', body: `${body}\n` });

/**
 * The C2SP tlog-witness HTTP API (`POST <prefix>/add-checkpoint`), as `sigil witness serve` runs it: the checkpoint
 * must be signed by a configured log key (404 for an unknown origin, 403 when no trusted key signed it), its old size
 * must be the size this witness cosigned last (409 with that size), the consistency proof must verify (422); then the
 * new state is kept durably and only then is the cosignature returned. Requests are checked and recorded one at a time.
 */
export function witnessService(options: WitnessServiceOptions): (req: IncomingMessage, res: ServerResponse) => void {
  let queue: Promise<unknown> = Promise.resolve();
  return (req, res) => {
    void (async () => {
      let answer: Answer;
      if (!/(^|\/)add-checkpoint$/.test(new URL(req.url ?? '/', 'http://witness').pathname)) answer = text(404, 'this witness serves POST add-checkpoint');
      else if (req.method !== 'POST') answer = text(405, 'add-checkpoint is a POST');
      else {
        const body = await readBody(req);
        if (body === undefined) answer = text(400, `the body is over ${MAX_BODY} bytes`);
        else {
          const turn = queue.then(() => addCheckpoint(options, body));
          queue = turn.catch(() => undefined);
          answer = await turn.catch((err: Error) => text(500, `the witness could not record the checkpoint: ${err.message}`));
        }
      }
      res.writeHead(answer.status, { 'content-type': answer.type, 'content-length': Buffer.byteLength(answer.body) });
      res.end(answer.body);
    })();
  };
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > MAX_BODY) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function addCheckpoint(options: WitnessServiceOptions, body: string): Promise<Answer> {
  let request;
  try {
    request = parseAddCheckpoint(body);
  } catch (err) {
    return text(400, (err as Error).message);
  }
  const origin = request.note.slice(0, request.note.indexOf('\n'));
  const keys = options.logs.filter((l) => l.origin === origin).map((l) => l.key);
  if (keys.length === 0) return text(404, `this witness does not follow the log of origin "${origin}"`);
  let checkpoint;
  try {
    checkpoint = parseCheckpoint(openNote(request.note, keys).text);
  } catch (err) {
    return text(403, `no key this witness trusts for "${origin}" signed the checkpoint: ${(err as Error).message}`);
  }
  if (request.oldSize > checkpoint.size) return text(400, `old size ${request.oldSize} is above the checkpoint's size ${checkpoint.size}`);
  const last = options.state.get(origin);
  const lastSize = last?.size ?? 0;
  const conflict: Answer = { status: 409, type: TLOG_SIZE_TYPE, body: `${lastSize}\n` };
  if (request.oldSize !== lastSize) return conflict;
  if (last !== undefined && request.oldSize === checkpoint.size) {
    if (last.root !== checkpoint.root.toString('base64')) return conflict;
  } else if (request.oldSize === 0) {
    if (request.proof.length > 0) return text(400, 'the consistency proof from size 0 must be empty');
  } else {
    try {
      verifyConsistency(request.oldSize, checkpoint.size, request.proof, Buffer.from(last!.root, 'base64'), checkpoint.root);
    } catch (err) {
      return text(422, (err as Error).message);
    }
  }
  await options.state.set(origin, { size: checkpoint.size, root: checkpoint.root.toString('base64') });
  options.onCosigned?.(origin, checkpoint.size);
  const timestamp = options.now?.() ?? Math.floor(Date.now() / 1000);
  return { status: 200, type: 'text/plain; charset=utf-8', body: options.key.cosign(checkpoint.text, timestamp) };
}
