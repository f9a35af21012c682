import { startObliviousRelay, type RunningRelay } from '../../src/cli/ohttp-relay.ts';
import { startRecordingProxy, type RecordingProxy } from './recording-proxy.ts';
import { startTestSigil, type TestSigil } from './sigil.ts';
import { startTestEngine, type TestEngine } from './test-engine.ts';

/** Where the relay listens, and the address it reaches Sigil from: each its own, so a test can tell who connected. */
export const RELAY_HOST = '127.0.0.2';
export const RELAY_EGRESS = '127.0.0.3';

/** client → relay → recording proxy → Sigil → engine, on loopback: the chain every Oblivious HTTP test runs. */
export interface RelayedSigil {
  engine: TestEngine;
  sigil: TestSigil;
  /** Between the relay and Sigil: every byte Sigil's socket received. */
  wire: RecordingProxy;
  relay: RunningRelay;
  close(): Promise<void>;
}

/** A development Sigil serving model `m` from a test engine, behind a recording proxy and `sigil ohttp-relay`'s relay. */
export async function startRelayedSigil(): Promise<RelayedSigil> {
  const engine = await startTestEngine({ modelNames: ['m'] });
  const sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
  const { hostname, port } = new URL(sigil.url);
  const wire = await startRecordingProxy({ host: hostname, port: Number(port) });
  const relay = await startObliviousRelay({ gateway: wire.url, host: RELAY_HOST, port: 0, localAddress: RELAY_EGRESS });
  return {
    engine,
    sigil,
    wire,
    relay,
    async close() {
      await relay.close();
      await wire.close();
      await sigil.close(0);
      await engine.close();
    },
  };
}
