/** `sigil engine`'s usage, apart from the engine so that --help works without node-llama-cpp installed. */
export const ENGINE_USAGE = `usage:
  sigil engine --model FILE.gguf [options]        serve a GGUF model with the OpenAI API
  sigil engine make-model --out FILE.gguf [options]
  sigil engine bench --model FILE.gguf [options]

sigil engine (serve):
  --model FILE.gguf     the model to serve (required)
  --host ADDRESS        address to listen on (default 127.0.0.1)
  --port N              port to listen on, 0 for any free port (default 8000)
  --parallel N          requests decoded at the same time (default 2)
  --threads N           CPU threads for llama.cpp (default 1)
  --context N           context size in tokens, per parallel slot (default 2048)
  --queue N             requests waiting for a slot; more are refused (default 16)

sigil engine make-model: writes a tiny llama GGUF with random weights, for tests and demos
  --out FILE.gguf       where to write it (required)
  --vocab FILE.gguf     take the tokenizer from this GGUF (default: the bundled Phi-3 tokenizer)
  --scripted "text"     greedy decoding answers exactly this text (default: random weights)
  --seed N              seed of the random weights (default 42: the same model every time)

sigil engine bench: measures the engine on a model and prints the figures as JSON
  --model FILE.gguf     the model to measure (required)
  --threads N           CPU threads (default 1)
  --parallel N          requests at the same time (default 2)
  --requests N          requests to time (default 5)
  --max-tokens N        tokens generated per request (default 256)
`;
