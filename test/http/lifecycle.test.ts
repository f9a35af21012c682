import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { addKey, revokeKey, hashApiKey } from '../../src/auth/keys-file.ts';
import { catalogueEntry, startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { nextEvent, waitFor } from '../support/wait-for.ts';
import type { ReloadOutcome } from '../../src/http/reload.ts';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()!();
});

async function setup(config: Record<string, unknown> = {}): Promise<{ engine: TestEngine; sigil: TestSigil }> {
  const engine = await startTestEngine({ modelNames: ['m', 'm2'] });
  const sigil = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }], config });
  cleanup.push(
    () => engine.close(),
    () => sigil.close(0),
  );
  return { engine, sigil };
}

const chat = (sigil: TestSigil, key = sigil.key, stream = false, model = 'm') =>
  fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], stream }),
  });

describe('graceful shutdown (SIGTERM)', () => {
  it('stops accepting but lets an in-flight stream finish', async () => {
    const { engine, sigil } = await setup();
    engine.behaviour = { chunkDelayMs: 40 };
    const res = await chat(sigil, sigil.key, true);
    const body = res.text();
    const stoppedAccepting = nextEvent(sigil.events, 'listener-closed');
    const closing = sigil.close(5000);
    await stoppedAccepting;
    await expect(fetch(`${sigil.url}/healthz`)).rejects.toMatchObject({ message: 'fetch failed', cause: { code: 'ECONNREFUSED' } });
    const text = await body;
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    await closing;
  });

  it('cuts what is still running when the grace period is over', async () => {
    const { engine, sigil } = await setup();
    engine.behaviour = { chunkDelayMs: 500 };
    const res = await chat(sigil, sigil.key, true);
    const body = res.text().catch(() => 'cut');
    const started = Date.now();
    await sigil.close(300);
    expect(Date.now() - started).toBeLessThan(1500);
    const text = await body;
    expect(text === 'cut' || !text.includes('[DONE]')).toBe(true);
  });
});

describe('reload (SIGHUP or file change)', () => {
  it('picks up added and revoked keys without a restart', async () => {
    const { sigil } = await setup();
    const { key } = addKey(join(sigil.dir, 'api-keys'), 'new');
    expect((await chat(sigil, key)).status).toBe(401);
    await sigil.reload();
    expect((await chat(sigil, key)).status).toBe(200);
    revokeKey(join(sigil.dir, 'api-keys'), hashApiKey(key).slice(0, 12));
    await sigil.reload();
    expect((await chat(sigil, key)).status).toBe(401);
    expect((await chat(sigil)).status).toBe(200);
  });

  it('swaps the catalogue and the policy hash together, and keeps the old ones when the new file is broken', async () => {
    const { sigil } = await setup();
    const policyBefore = await (await fetch(`${sigil.url}/v1/verify/policy`)).text();
    writeFileSync(join(sigil.dir, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0), catalogueEntry({ id: 'm2' }, 1)] }));
    await sigil.reload();
    const ids = (await (await fetch(`${sigil.url}/v1/models`)).json()).data.map((m: { id: string }) => m.id);
    expect(ids).toEqual(['m', 'm2']);
    const policyAfter = await (await fetch(`${sigil.url}/v1/verify/policy`)).text();
    expect(policyAfter).not.toBe(policyBefore);
    expect((await chat(sigil, sigil.key, false, 'm2')).status).toBe(200);

    writeFileSync(join(sigil.dir, 'models.yaml'), 'models: [{id: broken}]\n');
    await sigil.reload();
    expect(await (await fetch(`${sigil.url}/v1/verify/policy`)).text()).toBe(policyAfter);
    expect(sigil.logs.some((l) => l.includes('catalogue not reloaded'))).toBe(true);
  });

  it('drops no request while reloading under load', async () => {
    const { sigil } = await setup();
    const statuses: number[] = [];
    let reloading = true;
    const reloads = (async () => {
      // Each reload waits for a batch of requests to be answered, so that reloads and requests interleave.
      for (let i = 0; i < 20; i++) {
        await sigil.reload();
        const answered = statuses.length;
        await waitFor('a batch answered since the reload', () => statuses.length > answered);
      }
      reloading = false;
    })();
    const load = (async () => {
      while (reloading) {
        const batch = await Promise.all(Array.from({ length: 8 }, () => chat(sigil).then((r) => r.status)));
        statuses.push(...batch);
      }
    })();
    await Promise.all([reloads, load]);
    expect(statuses.length).toBeGreaterThan(8);
    expect(new Set(statuses)).toEqual(new Set([200]));
  });

  it('reloads the keys file when it changes on disk', async () => {
    const { sigil } = await setup();
    const { key } = addKey(join(sigil.dir, 'other-keys'), 'x');
    const line = (await import('node:fs'))
      .readFileSync(join(sigil.dir, 'other-keys'), 'utf8')
      .split('\n')
      .find((l) => l.startsWith('sha256:'))!;
    const reloaded = nextEvent<[ReloadOutcome]>(sigil.events, 'reloaded');
    appendFileSync(join(sigil.dir, 'api-keys'), `${line}\n`);
    expect((await reloaded)[0].keys).toBe(true);
    expect((await chat(sigil, key)).status).toBe(200);
  });
});

describe('engine restart', () => {
  it('is followed by /readyz and served again without restarting Sigil', async () => {
    const { engine, sigil } = await setup();
    const port = Number(new URL(engine.url).port);
    expect((await fetch(`${sigil.url}/readyz`)).status).toBe(200);
    await engine.close();
    // /readyz keeps its engine probe a second: the answer changes once the cached probe has expired.
    await waitFor('/readyz answering 503', async () => (await fetch(`${sigil.url}/readyz`)).status === 503);
    expect((await chat(sigil)).status).toBe(502);
    const again = await startTestEngine({ modelNames: ['m'], port });
    cleanup.push(() => again.close());
    await waitFor('/readyz answering 200', async () => (await fetch(`${sigil.url}/readyz`)).status === 200);
    expect((await chat(sigil)).status).toBe(200);
  });
});
