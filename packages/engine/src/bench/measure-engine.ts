import { startEngine } from '../server/start-engine.ts';

export interface EngineMeasureOptions {
  modelPath: string;
  threads: number;
  parallel: number;
  /** Requests per phase. */
  requests: number;
  maxTokens: number;
}

export interface EngineMeasurement {
  /** From nothing loaded to listening: llama.cpp binding, model, context, chat template. */
  loadMs: number;
  /** Time to the first content chunk of a stream. */
  firstTokenMs: number;
  /** Completion tokens per second, one request at a time, over HTTP on loopback. */
  sequentialTokensPerSecond: number;
  /** Completion tokens per second with `parallel` requests at once. */
  concurrentTokensPerSecond: number;
  completionTokens: number;
  peakRssMiB: number;
}

/** Starts the engine in this process and measures it the way a client sees it, straight, without the proxy. */
export async function measureEngine(options: EngineMeasureOptions): Promise<EngineMeasurement> {
  const started = performance.now();
  const engine = await startEngine({ ...options, host: '127.0.0.1', port: 0, contextSize: options.maxTokens + 64, maxQueued: options.parallel });
  const loadMs = performance.now() - started;
  const ask = async (stream = false) => {
    const res = await fetch(`${engine.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: options.maxTokens, temperature: 0, stream }),
    });
    if (!stream) return ((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens;
    await res.body!.getReader().read();
    return 0;
  };
  try {
    await ask();
    const firstStart = performance.now();
    await ask(true);
    const firstTokenMs = performance.now() - firstStart;

    let tokens = 0;
    const sequentialStart = performance.now();
    for (let i = 0; i < options.requests; i++) tokens += await ask();
    const sequentialTokensPerSecond = tokens / ((performance.now() - sequentialStart) / 1000);

    let concurrentTokens = 0;
    const concurrentStart = performance.now();
    for (let i = 0; i < options.requests; i++) {
      const counts = await Promise.all(Array.from({ length: options.parallel }, () => ask()));
      concurrentTokens += counts.reduce((a, b) => a + b, 0);
    }
    const concurrentTokensPerSecond = concurrentTokens / ((performance.now() - concurrentStart) / 1000);

    return {
      loadMs: Math.round(loadMs),
      firstTokenMs: Math.round(firstTokenMs),
      sequentialTokensPerSecond: Math.round(sequentialTokensPerSecond),
      concurrentTokensPerSecond: Math.round(concurrentTokensPerSecond),
      completionTokens: tokens + concurrentTokens,
      peakRssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
    };
  } finally {
    await engine.close();
  }
}
