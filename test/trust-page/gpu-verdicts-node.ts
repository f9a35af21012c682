/**
 * Run by test/trust-page/browser-crypto.test.ts in a child process (through tsx), where node:crypto is Node's own:
 * the GPU verifier's verdicts on the real H100 report and chain, tampered copies, and RIMs (NVIDIA's samples and RIMs
 * signed by a test RIM root), printed as JSON with the inputs, so the test gives the same inputs to the browser adapter.
 */
import { gpuEvidenceSha256 } from '../../src/protocol/attestation.ts';
import { verifyGpuEvidence, DEFAULT_GPU_TRUST_ROOTS, type VerifyGpuEvidenceOptions } from '../../src/verify/gpu/index.ts';
import { createRimTestChain, gpuEntry, realReport, rimMatchingReport, rimText, signRim, VECTOR_NONCE, VECTOR_TIME } from '../support/gpu-fixtures.ts';

function flipped(bytes: Uint8Array, offset: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[offset] = copy[offset]! ^ 0x01;
  return copy;
}

const chain = await createRimTestChain();
const testRoots = { deviceIdentity: DEFAULT_GPU_TRUST_ROOTS.deviceIdentity, rim: [chain.rootPem] };
const matching = [
  signRim(rimMatchingReport(rimText('driver-rim-test.swidtag'), '550.90.07'), chain),
  signRim(rimMatchingReport(rimText('vbios-rim-test.swidtag'), '96.00.9F.00.01'), chain),
];
const at = VECTOR_TIME.toISOString();
const entry = gpuEntry();
const FIRST_BLOCK_VALUE = 37 + 8 + 7;

const cases: Array<{ label: string; entries: unknown[]; options: Omit<VerifyGpuEvidenceOptions, 'at' | 'nonce'> & { at: string; nonce?: string } }> = [
  { label: 'real report, no RIMs', entries: [entry], options: { nonce: VECTOR_NONCE, at } },
  {
    label: 'real report, bound, at the current time',
    entries: [entry],
    options: { nonce: VECTOR_NONCE, at: new Date().toISOString(), boundSha256: [gpuEvidenceSha256(entry)] },
  },
  {
    label: "NVIDIA's sample RIMs (other versions)",
    entries: [entry],
    options: { nonce: VECTOR_NONCE, at, rims: [rimText('driver-rim-test.swidtag'), rimText('vbios-rim-test.swidtag')] },
  },
  { label: 'matching RIMs signed by a test root', entries: [entry], options: { nonce: VECTOR_NONCE, at, rims: matching, roots: testRoots } },
  { label: 'a measurement byte changed', entries: [gpuEntry(flipped(realReport(), FIRST_BLOCK_VALUE + 55))], options: { nonce: VECTOR_NONCE, at } },
  { label: 'a signature byte changed', entries: [gpuEntry(flipped(realReport(), 4117 - 10))], options: { nonce: VECTOR_NONCE, at } },
  {
    label: 'a RIM changed after signing',
    entries: [entry],
    options: {
      nonce: VECTOR_NONCE,
      at,
      rims: [matching[0]!.replace(/Hash0="([0-9a-f])/, (_m, c: string) => `Hash0="${c === '0' ? '1' : '0'}`), matching[1]!],
      roots: testRoots,
    },
  },
];

const out = cases.map((c) => {
  const { at: when, ...rest } = c.options;
  return { ...c, checks: verifyGpuEvidence(c.entries as never, { ...rest, at: new Date(when) }).checks };
});
process.stdout.write(JSON.stringify(out));
