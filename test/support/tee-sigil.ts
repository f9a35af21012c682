import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { createConfigfsTsmProvider } from '../../src/attestation/configfs-tsm.ts';
import { FakeConfigfs } from '../attestation/fake-configfs.ts';
import { FakeSysfsRtmr } from '../attestation/fake-sysfs-rtmr.ts';
import { amdCertTable, buildSnpReport, buildTdxQuote, type AmdTestChain, type IntelTestChain } from './evidence-fixtures.ts';
import { startTestSigil, type TestSigil } from './sigil.ts';

/** Sigil on a stand-in TEE: what it serves is Sigil's own, only the hardware below it is fake. */
export interface TeeSigil extends TestSigil {
  /** The manifest Sigil measured itself as (`binding.manifest_sha384` of its start evidence): what a release of this code states. */
  manifest: string;
}

/** The running Sigil as a TeeSigil: its manifest read once, its stand-in hardware removed once it is closed. */
async function onStandIn(sigil: TestSigil, hardware: Array<{ dispose(): Promise<void> }>): Promise<TeeSigil> {
  return {
    ...sigil,
    manifest: await manifestOf(sigil.url),
    close: async (graceMs?: number) => {
      await sigil.close(graceMs);
      for (const part of hardware) await part.dispose();
    },
  };
}

/** Its start evidence's manifest, fetched over its self-signed TLS (the key the evidence binds, trusted here as is). */
async function manifestOf(url: string): Promise<string> {
  const insecure = new Agent({ connect: { rejectUnauthorized: false } });
  try {
    const answer = await request(`${url}/v1/verify/attestation`, { dispatcher: insecure });
    return ((await answer.body.json()) as { binding: { manifest_sha384: string } }).binding.manifest_sha384;
  } finally {
    await insecure.close();
  }
}

/**
 * Sigil on a fake SEV-SNP guest (a configfs-tsm stand-in whose reports `chain`'s VCEK signs), with its TLS key
 * self-signed for localhost and bound in the evidence. `report` makes each report for the report data Sigil asks
 * (default: one measuring `measurement`); the i-th call is the i-th report, the start evidence first.
 */
export async function startSnpSigil(options: {
  engineUrl: string;
  chain: AmdTestChain;
  measurement: Uint8Array;
  /** Milan's CPUID in the report (family 0x19, model 0x01), as the product in `chain` names it; the test chain's otherwise. */
  milan?: boolean;
  report?: (reportData: Uint8Array, call: number) => Uint8Array;
  /** The one model it serves, as the engine names it (default m1). */
  model?: string;
  /** A certificate table without AMD's CRL (the verifier must get it elsewhere). */
  withoutCrl?: boolean;
}): Promise<TeeSigil> {
  const cpuid = options.milan === true ? { cpuid: { family: 0x19, model: 0x01 } } : {};
  const report = options.report ?? ((reportData) => buildSnpReport({ reportData, measurement: options.measurement, ...cpuid }, options.chain.vcekKey));
  const certificates = amdCertTable(options.withoutCrl === true ? { ...options.chain, crl: undefined } : options.chain);
  let calls = 0;
  const machine = await FakeConfigfs.create({
    provider: 'sev_guest',
    makeEvidence: (inblob) => ({ outblob: report(inblob, calls++), auxblob: certificates }),
  });
  const sigil = await startTestSigil({
    upstreams: { e: { url: options.engineUrl } },
    models: [{ id: options.model ?? 'm1' }],
    config: { tls: { mode: 'self-signed', hostnames: ['localhost'] }, log: { level: 'silent' } },
    start: { attestationProvider: await createConfigfsTsmProvider({ tsmPath: machine.reportDir, fs: machine }), trustRoots: options.chain.roots },
  });
  return onStandIn(sigil, [machine]);
}

/** Sigil on a fake TDX guest: configfs-tsm quotes `chain` signs, measuring `mrTd` and RTMR3 as Sigil extended it (a stand-in sysfs). */
export async function startTdxSigil(options: { engineUrl: string; chain: IntelTestChain; mrTd: Uint8Array }): Promise<TeeSigil> {
  const rtmr = await FakeSysfsRtmr.create();
  const zero = new Uint8Array(48);
  const machine = await FakeConfigfs.create({
    provider: 'tdx_guest',
    makeEvidence: (inblob) => ({
      outblob: buildTdxQuote({ reportData: inblob, mrTd: options.mrTd, rtmrs: [zero, zero, zero, readFileSync(rtmr.rtmrPath)] }, options.chain),
    }),
  });
  const sigil = await startTestSigil({
    upstreams: { e: { url: options.engineUrl } },
    models: [{ id: 'm1' }],
    config: {
      tls: { mode: 'self-signed', hostnames: ['localhost'] },
      log: { level: 'silent' },
      attestation: {
        rtmr_path: rtmr.rtmrPath,
        ccel_table_path: join(rtmr.root, 'no-CCEL'),
        ccel_data_path: join(rtmr.root, 'no-CCEL-data'),
        runtime_log_path: join(rtmr.root, 'run/rtmr-events.json'),
      },
    },
    start: {
      rtmrFs: rtmr,
      attestationProvider: await createConfigfsTsmProvider({ tsmPath: machine.reportDir, fs: machine }),
      trustRoots: options.chain.roots,
    },
  });
  return onStandIn(sigil, [machine, rtmr]);
}
