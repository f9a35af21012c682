/** `sigil engine`'s usage, apart from the engine so that --help works without node-llama-cpp installed. */
export const ENGINE_USAGE = `usage:
  sigil engine --model FILE.gguf [--host 127.0.0.1] [--port 8000] [--parallel 2] [--threads 1] [--context 2048] [--queue 16]
  sigil engine make-model --out FILE.gguf [--vocab FILE.gguf] [--scripted "text"] [--seed N]
  sigil engine bench --model FILE.gguf [--threads 1] [--parallel 2] [--requests 5] [--max-tokens 256]
`;
