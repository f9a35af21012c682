import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConnect } from '../../src/connect/start.ts';
import { createAmdTestChain, pinnedSnpReference, type AmdTestChain } from '../support/evidence-fixtures.ts';
import { startSnpSigil, type TeeSigil } from '../support/tee-sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';

/** sigil connect in front of a Sigil with SEV-SNP evidence from a test AMD chain: reference values decide, as for sigil verify. */
const measurement = randomBytes(48);
let engine: TestEngine;
let chain: AmdTestChain;
let service: TeeSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  chain = await createAmdTestChain('Milan');
  service = await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement, milan: true, model: 'm' });
});
afterAll(async () => {
  await service.close(0);
  await engine.close();
});

const listen = { host: '127.0.0.1', port: 0 };

describe('sigil connect against hardware evidence', () => {
  it('with reference values that pin the service: "Verified", and answers pass with verified receipts', async () => {
    const connect = await startConnect({ service: service.url, listen, roots: chain.roots, reference: pinnedSnpReference(measurement, service.manifest) });
    try {
      const app = new OpenAI({ baseURL: `${connect.url}/v1`, apiKey: service.key, maxRetries: 0 });
      const completion = await app.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
      expect(completion.choices[0]?.message.content).toBe(engine.reply);
      const status = connect.status();
      expect(status.verdict).toMatchObject({
        headline: 'verified',
        text: 'Verified: genuine confidential hardware, running the code your reference values name.',
      });
      expect(status.tee).toBe('sev-snp');
      expect(status.receipts).toMatchObject({ verified: 1, failed: 0 });
    } finally {
      await connect.close();
    }
  });

  it('without reference values: refuses to start, sending nothing, and names what nobody pinned', async () => {
    const before = engine.requests.length;
    const refused = await startConnect({ service: service.url, listen, roots: chain.roots }).then(
      () => undefined,
      (e: unknown) => e as Error & { checks?: Array<{ name: string; pinned?: boolean }> },
    );
    // Every check nobody pinned is named in one message, with the flag that would accept them and its risk.
    expect(refused?.message).toMatch(
      /: snp\.smt, .*attestation\.measurement, reference\.values.* did not pass: these values were measured but compared with nothing you audited.*--allow-unpinned-code accepts it$/,
    );
    expect(refused?.checks?.some((c) => c.pinned === false)).toBe(true);
    expect(engine.requests.length).toBe(before);
  });

  it('a measurement the reference values do not name: refused', async () => {
    const other = pinnedSnpReference(randomBytes(48), service.manifest);
    const refused = await startConnect({ service: service.url, listen, roots: chain.roots, reference: other }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(refused?.message).toMatch(/^the service's attestation did not verify, so nothing was sent: .*measurement/);
  });
});
