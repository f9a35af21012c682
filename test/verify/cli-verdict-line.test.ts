import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyCommand } from '../../src/cli/verify.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
});
afterAll(async () => {
  await sigil.close(0);
  await engine.close();
});

/** `sigil verify ARGS` exactly as typed: no -v added. */
async function verify(argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await verifyCommand(argv, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    stdin: Readable.from([]),
    env: {},
  });
  return { code, stdout, stderr };
}

describe('sigil verify prints one line by default', () => {
  it('a development service with --allow-no-tee: the verdict and its counts, on one line', async () => {
    const r = await verify(['--url', sigil.url, '--api-key', sigil.key, '--model', 'm', '--allow-no-tee']);
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.stdout).toMatch(
      /^verified with waivers: \d+ checks passed; 4 waived \(attestation\.tls_key, attestation\.tee, attestation\.manifest, receipt\.tee\); note: the service keeps no transparency log \(docs\/log\.md\) \(sigil verify -v lists every check\)\n$/,
    );
  });

  it('not verified: the counts and where the detail is, still one line', async () => {
    const r = await verify(['--url', sigil.url, '--api-key', sigil.key, '--model', 'm']);
    expect(r.code).toBe(1);
    expect(r.stdout.split('\n')).toHaveLength(2);
    expect(r.stdout).toMatch(/^NOT VERIFIED: 3 of \d+ checks failed.* \(sigil verify -v lists every check\)\n$/);
  });

  it('-v prints every check, then the same verdict', async () => {
    const r = await verify(['-v', '--url', sigil.url, '--api-key', sigil.key, '--model', 'm', '--allow-no-tee']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^PASS receipt\.signature — /m);
    expect(r.stdout).toMatch(/^WAIVED attestation\.tee — /m);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toMatch(/^verified with waivers: \d+ checks passed; 4 waived /);
  });
});
