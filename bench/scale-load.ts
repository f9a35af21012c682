/**
 * One load process of bench/scale.ts: keeps `concurrency` streams open back to back for a while, over
 * HTTPS (trusting the bench certificate) and, with EHBP, each request sealed afresh by the npm `ehbp`
 * client (a sealed request is refused if sent twice). Its first stream is opened and checked whole (every
 * token event in order, then the receipt); the others are counted frame by frame (sealed) or event by
 * event (clear), so the client's decryption does not become the limit. Started by scale.ts over IPC.
 */
import { Identity } from 'ehbp';
import { Agent, request } from 'undici';

export interface ScaleJob {
  base: string;
  /** PEM of the bench certificate; absent for plain HTTP. */
  ca?: string;
  key: string;
  ehbp: boolean;
  receipts: boolean;
  concurrency: number;
  durationMs: number;
  tokens: number;
}

export interface ScaleResult {
  /** Streams that ended with status 200 and every event (or frame) they owed. */
  streamsOk: number;
  streamsBad: number;
  /** Token events carried by the streams that were whole. */
  events: number;
  seconds: number;
  /** What the first stream opened whole showed, or why it failed. */
  sample: string;
  firstProblem?: string;
}

const CHAT = '/v1/chat/completions';

async function run(job: ScaleJob): Promise<ScaleResult> {
  const agent = new Agent({ connections: job.concurrency, ...(job.ca === undefined ? {} : { connect: { ca: job.ca } }) });
  const headers: Record<string, string> = { authorization: `Bearer ${job.key}`, 'content-type': 'application/json' };
  if (job.receipts) headers['x-service-receipt'] = 'true';
  const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: job.tokens, stream: true });
  let identity: Identity | undefined;
  if (job.ehbp) {
    const keys = await request(`${job.base}/.well-known/hpke-keys`, { dispatcher: agent });
    if (keys.statusCode !== 200) throw new Error(`/.well-known/hpke-keys answered ${keys.statusCode}`);
    identity = await Identity.unmarshalPublicConfig(new Uint8Array(await keys.body.arrayBuffer()));
  }
  const result: ScaleResult = { streamsOk: 0, streamsBad: 0, events: 0, seconds: 0, sample: 'no stream was opened whole' };
  const bad = (why: string) => {
    result.streamsBad++;
    result.firstProblem ??= why;
  };

  /** The first stream, opened whole: each event `t1 ` … `tN ` in order, then (with receipts) the receipt comment. */
  const checkWhole = (text: string) => {
    const contents = [...text.matchAll(/"content":"(t\d+ )"/g)].map((m) => m[1]);
    const expected = Array.from({ length: job.tokens }, (_, k) => `t${k + 1} `);
    if (contents.join('') !== expected.join('')) return `the whole stream carried ${contents.length} token events, not t1..t${job.tokens} in order`;
    if (job.receipts && !/\n: receipt [\w-]+\.[\w-]+\.[\w-]+\n\n$/.test(text)) return 'the whole stream did not end with its receipt';
    return undefined;
  };

  const once = async (whole: boolean) => {
    let sendHeaders = headers;
    let sendBody: Uint8Array | string = body;
    let context: Awaited<ReturnType<Identity['encryptRequestWithContext']>>['context'] | undefined;
    if (identity !== undefined) {
      const sealed = await identity.encryptRequestWithContext(new Request(`${job.base}${CHAT}`, { method: 'POST', headers, body }));
      sendHeaders = Object.fromEntries(sealed.request.headers.entries());
      sendBody = new Uint8Array(await sealed.request.arrayBuffer());
      context = sealed.context;
    }
    const response = await request(`${job.base}${CHAT}`, { method: 'POST', headers: sendHeaders, body: sendBody, dispatcher: agent });
    if (response.statusCode !== 200) {
      bad(`status ${response.statusCode}: ${(await response.body.text()).slice(0, 200)}`);
      return;
    }
    if (whole) {
      let text: string;
      if (identity !== undefined) {
        const raw = new Response(response.body as unknown as ReadableStream, { headers: response.headers as Record<string, string> });
        text = await (await identity.decryptResponseWithContext(raw, context!)).text();
      } else {
        text = await response.body.text();
      }
      const problem = checkWhole(text);
      if (problem !== undefined) return bad(problem);
      result.sample = `${job.tokens} token events in order${job.receipts ? ', then the receipt' : ''}${identity !== undefined ? ', sealed' : ''}`;
    } else if (identity !== undefined) {
      // Sealed: one frame (4-byte length, then ciphertext) per event the engine sent: role, tokens, finish, [DONE], receipt.
      let pending: Buffer = Buffer.alloc(0);
      let frames = 0;
      for await (const chunk of response.body) {
        pending = pending.length === 0 ? (chunk as Buffer) : Buffer.concat([pending, chunk as Buffer]);
        while (pending.length >= 4 && pending.length >= 4 + pending.readUInt32BE(0)) {
          pending = pending.subarray(4 + pending.readUInt32BE(0));
          frames++;
        }
      }
      if (frames < job.tokens + 1) return bad(`a sealed stream carried ${frames} frames for ${job.tokens} token events`);
    } else {
      let events = 0;
      for await (const chunk of response.body) events += (chunk as Buffer).toString('latin1').split('data: ').length - 1;
      if (events < job.tokens + 1) return bad(`a stream carried ${events} events for ${job.tokens} token events`);
    }
    result.streamsOk++;
    result.events += job.tokens;
  };

  const started = performance.now();
  const deadline = started + job.durationMs;
  await once(true).catch((err: Error) => bad(err.message));
  const loop = async () => {
    while (performance.now() < deadline) await once(false).catch((err: Error) => bad(err.message));
  };
  await Promise.all(Array.from({ length: job.concurrency }, loop));
  result.seconds = (performance.now() - started) / 1000;
  await agent.close();
  return result;
}

process.on('message', (job: ScaleJob) => {
  run(job).then(
    (result) => process.send!({ result }),
    (err: Error) => process.send!({ message: err.stack ?? err.message }),
  );
});
