import type { LoadedConfig } from '../config/load.ts';
import { UsageError } from './cli-errors.ts';

/** Where `sigil serve --host/--port` or `SIGIL_HOST`/`SIGIL_PORT` put the listener, and which of them said so (for messages). */
export interface ListenOverride {
  host?: { value: string; from: string };
  port?: { value: number; from: string };
}

function portFrom(text: string, from: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) throw new UsageError(`${from} is a port number from 0 to 65535 (0: any free port), not '${text}'`);
  return Number(text);
}

/** `--host`/`--port`, else `SIGIL_HOST`/`SIGIL_PORT` (commander reads both, a flag first); an empty variable counts as unset. */
export function listenOverride(line: {
  values: { host?: string | undefined; port?: string | undefined };
  sourceOf(name: 'host' | 'port'): string | undefined;
}): ListenOverride {
  const given = (name: 'host' | 'port') => {
    const value = line.values[name];
    const from = line.sourceOf(name);
    return value === undefined || from === undefined || (value === '' && from !== `--${name}`) ? undefined : { value, from };
  };
  const override: ListenOverride = {};
  const host = given('host');
  if (host !== undefined) {
    if (host.value.trim() === '') throw new UsageError(`${host.from} is an address to listen on, e.g. 127.0.0.1 or 0.0.0.0`);
    override.host = host;
  }
  const port = given('port');
  if (port !== undefined) override.port = { value: portFrom(port.value, port.from), from: port.from };
  return override;
}

/** The config with the override applied: every later check (the TEE refusal on a network address included) sees the address used. */
export function applyListenOverride(config: LoadedConfig, override: ListenOverride): LoadedConfig {
  if (override.host === undefined && override.port === undefined) return config;
  return { ...config, listen: { ...config.listen, host: override.host?.value ?? config.listen.host, port: override.port?.value ?? config.listen.port } };
}

/** Names where the address came from, for a message about it: the flags and variables used, else the config keys. */
export function listenSource(config: LoadedConfig, override: ListenOverride): string {
  const host = override.host?.from ?? `listen.host in ${config.source}`;
  const port = override.port?.from ?? `listen.port in ${config.source}`;
  return override.host === undefined && override.port === undefined ? `listen.host, listen.port in ${config.source}` : `${host}; ${port}`;
}
