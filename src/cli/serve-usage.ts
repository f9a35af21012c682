/** `sigil serve`'s usage line, printed under a command line it refuses. */
export const SERVE_USAGE_LINE = 'usage: sigil serve [--config FILE] [--host HOST] [--port PORT]';

/** `sigil serve --help`. */
export const SERVE_USAGE = `${SERVE_USAGE_LINE}

Runs the proxy. With no upstream configured, starts the built-in engine with a generated demo model.

  --config FILE   the configuration (default: $SIGIL_CONFIG, else config/sigil.yaml)
  --host HOST     listen on HOST instead of listen.host (default: $SIGIL_HOST, else the config's)
  --port PORT     listen on PORT instead of listen.port; 0: any free port (default: $SIGIL_PORT, else the config's)

API keys: their hashes live in the file auth.keys_file names (config/sigil.yaml: .sigil/api-keys);
\`sigil keys add\` adds one and prints it once; a development start (attestation.provider none) with
no keys file yet makes one and prints it once.
SIGHUP reloads the keys file and the catalogue; SIGTERM or Ctrl-C stops (docs/operations.md).
`;
