import { getLlama, LlamaLogLevel, type Llama } from 'node-llama-cpp';

let llama: Promise<Llama> | undefined;

/** The process-wide llama.cpp binding: CPU only (the prebuilt npm binary), quiet unless something fails. */
export function loadLlama(): Promise<Llama> {
  llama ??= getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  return llama;
}

/** Releases the binding, so a command that used it can exit without waiting on its handles. */
export async function disposeLlama(): Promise<void> {
  const loaded = llama;
  llama = undefined;
  if (loaded) await (await loaded).dispose();
}
