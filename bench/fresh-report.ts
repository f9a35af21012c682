/**
 * What a fresh hardware report costs against the start evidence and a signed nonce (docs/decisions.md, "Fresh evidence"):
 * the time of one attestation by the attested client each way, and the server's share of it (the answer's time), against
 * Sigil on a stand-in SEV-SNP guest (configfs-tsm whose reports a test AMD chain signs). The stand-in makes a report in
 * microseconds; on real hardware add the firmware's time (SNP_GET_REPORT through configfs-tsm) and, with GPUs, NVML's.
 *
 *   npx tsx bench/fresh-report.ts [--rounds 40]
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { attest } from '../src/client/attest.ts';
import { createAmdTestChain, pinnedSnpReference } from '../test/support/evidence-fixtures.ts';
import { startSnpSigil } from '../test/support/tee-sigil.ts';
import { startTestEngine } from '../test/support/test-engine.ts';
import { summarize } from './stats.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '40' } } });
const rounds = Number(values.rounds);
const measurement = randomBytes(48);
const engine = await startTestEngine({ modelNames: ['m'] });
const chain = await createAmdTestChain('Milan');
const sigil = await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement, milan: true, model: 'm' });
const reference = pinnedSnpReference(measurement, sigil.manifest);
const insecure = new Agent({ connect: { rejectUnauthorized: false } });

async function served(proof: 'report' | 'signature'): Promise<number> {
  const nonce = randomBytes(32).toString('hex');
  const started = performance.now();
  const answer = await request(`${sigil.url}/v1/verify/attestation?nonce=${nonce}${proof === 'signature' ? '&proof=signature' : ''}`, { dispatcher: insecure });
  await answer.body.arrayBuffer();
  if (answer.statusCode !== 200) throw new Error(`the service answered ${answer.statusCode}`);
  return performance.now() - started;
}

async function attestation(freshReport: boolean): Promise<number> {
  const started = performance.now();
  const result = await attest({ baseURL: sigil.url, reference, roots: chain.roots, freshReport });
  if (result.verdict.outcome === 'not-verified') throw new Error(result.verdict.summary);
  return performance.now() - started;
}

try {
  const times = { report: [] as number[], signature: [] as number[], freshAttest: [] as number[], signedAttest: [] as number[] };
  // Alternating, so a load change on the machine falls on both alike; the first of each is a warm-up.
  for (let i = 0; i <= rounds; i++) {
    const [r, s, f, g] = [await served('report'), await served('signature'), await attestation(true), await attestation(false)];
    // Two fresh reports a round: paced under the service's allowance (5 a second after a burst of 10), which would answer 429.
    await delay(500);
    if (i === 0) continue;
    times.report.push(r);
    times.signature.push(s);
    times.freshAttest.push(f);
    times.signedAttest.push(g);
  }
  for (const [name, list] of Object.entries(times)) console.log(name.padEnd(13), JSON.stringify(summarize(list)));
} finally {
  await insecure.close();
  await sigil.close(0);
  await engine.close();
}
