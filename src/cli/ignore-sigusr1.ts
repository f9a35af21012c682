/**
 * Node opens its inspector (127.0.0.1:9229) on SIGUSR1 unless the program listens for that signal, and through the
 * inspector anyone who may signal the process runs code in it, where the receipt, HPKE and TLS private keys live.
 * The CLI imports this module first, so every Sigil process (serve, its workers, the built-in engine) ignores the
 * signal from its first module on; a start on a TEE refuses an inspector opened before that (runtime-options.ts).
 */
process.on('SIGUSR1', () => process.stderr.write(`sigil: SIGUSR1 ignored (pid ${process.pid}): the inspector stays closed\n`));
