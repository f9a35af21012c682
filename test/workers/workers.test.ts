import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { startSigilProcess, workerPids, type SigilProcess } from '../support/sigil-process.ts';
import { once } from './fresh-connection.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { waitFor } from '../support/wait-for.ts';

const running: Array<{ sigil: SigilProcess; engine: TestEngine }> = [];

afterEach(async () => {
  for (const { sigil, engine } of running.splice(0)) {
    for (const pid of workerPids(sigil.child.pid!)) killQuietly(pid);
    sigil.child.kill('SIGKILL');
    await engine.close();
  }
});

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

async function serve(config: Record<string, unknown> = {}): Promise<{ sigil: SigilProcess; engine: TestEngine }> {
  const engine = await startTestEngine({ modelNames: ['m'] });
  const sigil = await startSigilProcess(engine.baseUrl, { workers: 2, ...config });
  running.push({ sigil, engine });
  return { sigil, engine };
}

const chat = (sigil: SigilProcess, extra: Record<string, string> = {}, stream = false) =>
  once(sigil.url, '/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', ...extra },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream }),
  });

const chatWith = (sigil: SigilProcess, key: string) => chat({ ...sigil, key });

/** One scrape of /metrics: the whole server's, whichever worker answers. */
async function scrape(url: string): Promise<string> {
  const { status, body } = await once(url, '/metrics');
  expect(status).toBe(200);
  return body;
}

const metric = (text: string, line: RegExp) => Number(line.exec(text)?.[1] ?? 0);
/** The workers a scrape names, by their `sigil_worker_info` lines. */
const workersIn = (text: string) => [...text.matchAll(/^sigil_worker_info\{worker="(\d+)"\} 1$/gm)].map((m) => m[1]).sort();

describe('sigil serve with workers: 2', { timeout: 120_000 }, () => {
  it('answers from two worker processes behind one port, each named in /metrics, and logs listening once', async () => {
    const { sigil } = await serve();
    expect(workerPids(sigil.child.pid!)).toHaveLength(2);
    for (let i = 0; i < 2; i++) {
      const text = await scrape(sigil.url);
      expect(workersIn(text)).toEqual(['1', '2']);
      expect(metric(text, /^sigil_workers (\d+)$/m)).toBe(2);
    }
    expect(sigil.logs.filter((l) => l.msg === 'sigil listening')).toHaveLength(1);
    expect(sigil.logs.find((l) => l.msg === 'sigil listening')).toMatchObject({ workers: 2, url: sigil.url });
    expect(
      sigil.logs
        .filter((l) => l.msg === 'worker listening')
        .map((l) => l.worker)
        .sort(),
    ).toEqual([1, 2]);
    for (let i = 0; i < 4; i++) expect((await chat(sigil)).status).toBe(200);
  });

  it('scrapes the whole server from any worker: counters summed over both workers, one admit call and one finish notice per chat request', async () => {
    const { sigil } = await serve();
    const sent = 6;
    for (let i = 0; i < sent; i++) expect((await chat(sigil, {}, i % 2 === 0)).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const text = await scrape(sigil.url);
      expect(metric(text, /^sigil_requests_total\{route="\/v1\/chat\/completions",model="m",status="200"\} (\d+)$/m)).toBe(sent);
      expect(metric(text, /^sigil_request_duration_seconds_count\{route="\/v1\/chat\/completions"\} (\d+)$/m)).toBe(sent);
      expect(metric(text, /^sigil_worker_calls_total\{op="limits.admit"\} (\d+)$/m)).toBe(sent);
      expect(metric(text, /^sigil_worker_calls_total\{op="limits.finish"\} (\d+)$/m)).toBe(sent);
      // The memory budget is counted in the primary, but leased ahead: one lease a worker, not a call per request.
      expect(metric(text, /^sigil_worker_calls_total\{op="budget.lease"\} (\d+)$/m)).toBeLessThanOrEqual(2);
      expect(metric(text, /^sigil_build_info\{.*\} (\d+)$/m)).toBe(1);
      expect(metric(text, /^sigil_upstream_up\{upstream="e"\} (\d+)$/m)).toBe(1);
    }
    // Both workers served (connections go to each in turn): each counted its own, and only the sum is the number sent.
    const served = () => sigil.logs.filter((l) => l.msg === 'request' && l.route === '/v1/chat/completions').map((l) => l.worker);
    await waitFor('every request logged', () => served().length >= sent);
    expect(served().sort()).toEqual([1, 1, 1, 2, 2, 2]);
  });

  it('serves one JWKS, one start attestation and one HPKE key from every worker', async () => {
    const { sigil } = await serve();
    for (const path of ['/v1/verify/jwks.json', '/v1/verify/attestation', '/.well-known/hpke-keys']) {
      const bodies = new Set<string>();
      for (let i = 0; i < 4; i++) {
        const answer = await once(sigil.url, path);
        expect(answer.status).toBe(200);
        bodies.add(answer.body);
      }
      expect(bodies.size).toBe(1);
    }
    expect(sigil.logs.filter((l) => l.msg === 'sigil listening')).toHaveLength(1);
  });

  it('counts requests_per_minute once for all workers: the fourth request of three allowed is refused, whichever worker takes it', async () => {
    const { sigil, engine } = await serve({ limits: { requests_per_minute: 3 } });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await chat(sigil)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(engine.requests.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(3);
  });

  it('counts max_concurrent once for all workers: a second request while one streams is refused, whichever worker takes it', async () => {
    const { sigil, engine } = await serve({ limits: { max_concurrent: 1 } });
    engine.behaviour.chunkDelayMs = 100;
    const first = chat(sigil, {}, true);
    await waitFor('the stream at the engine', () => engine.requests.some((r) => r.path === '/v1/chat/completions'));
    const refused = [];
    // Each on a connection of its own: the cluster hands them to both workers in turn.
    for (let i = 0; i < 2; i++) refused.push(await chat(sigil));
    expect(refused.map((a) => [a.status, JSON.parse(a.body).error.message])).toEqual([
      [429, 'This server is at its limit of concurrent requests; retry shortly.'],
      [429, 'This server is at its limit of concurrent requests; retry shortly.'],
    ]);
    expect((await first).status).toBe(200);
    // The slot is freed once the primary has the worker's finish notice (sent after the stream's last byte).
    await waitFor(
      'the finish notice at the primary',
      async () => metric(await scrape(sigil.url), /^sigil_worker_calls_total\{op="limits.finish"\} (\d+)$/m) >= 1,
    );
    engine.behaviour.chunkDelayMs = 0;
    expect((await chat(sigil)).status).toBe(200);
  });

  it('serves a receipt made by one worker through the other', async () => {
    const { sigil } = await serve();
    const made = await chat(sigil, { 'x-service-receipt': 'true' }, true);
    expect(made.status).toBe(200);
    const id = made.headers['x-service-receipt-id'] as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const receipt = made.body.slice(made.body.indexOf(': receipt ') + ': receipt '.length).trim();
    for (let i = 0; i < 4; i++) {
      const fetched = await once(sigil.url, `/v1/receipts/${id}`, { headers: { authorization: `Bearer ${sigil.key}` } });
      expect(fetched.status).toBe(200);
      expect(JSON.parse(fetched.body)).toEqual({ id, receipt });
    }
    const text = await scrape(sigil.url);
    expect(metric(text, /^sigil_requests_total\{route="\/v1\/receipts\/\{id\}".*status="200"\} (\d+)$/m)).toBe(4);
  });

  it('passes a reload on SIGHUP to every worker: a key added to the keys file works whichever worker answers', async () => {
    const { sigil } = await serve();
    const { key } = addKey(join(sigil.dir, 'keys'), 'added');
    const withKey = () => once(sigil.url, '/v1/models', { headers: { authorization: `Bearer ${key}` } });
    sigil.child.kill('SIGHUP');
    await waitFor('the reload applied by both workers', () => sigil.logs.filter((l) => l.msg === 'worker applied the reload').length === 2);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await chatWith(sigil, key)).status);
    expect(statuses).toEqual([200, 200, 200, 200]);
    expect((await withKey()).status).toBe(200);
  });

  it('replaces a worker that dies, says so in the log and in /metrics, and keeps serving', async () => {
    const { sigil } = await serve();
    const [victim] = workerPids(sigil.child.pid!);
    process.kill(victim!, 'SIGKILL');
    await waitFor('the replacement worker listening', () => sigil.logs.filter((l) => l.msg === 'worker listening').length >= 3);
    expect(sigil.logs.find((l) => l.msg === 'worker died; starting a replacement')).toMatchObject({
      level: 40,
      pid: victim,
      signal: 'SIGKILL',
      replacements: 1,
    });
    const pids = workerPids(sigil.child.pid!);
    expect(pids).toHaveLength(2);
    expect(pids).not.toContain(victim);
    const text = await scrape(sigil.url);
    expect(metric(text, /^sigil_worker_replacements_total (\d+)$/m)).toBe(1);
    expect(metric(text, /^sigil_workers (\d+)$/m)).toBe(2);
    // The dead worker is gone from the scrape; its replacement is the third worker forked.
    expect(workersIn(text)).toHaveLength(2);
    expect(workersIn(text)).toContain('3');
    for (let i = 0; i < 4; i++) expect((await chat(sigil)).status).toBe(200);
  });

  it('drains every worker on SIGTERM: a stream in flight on each ends whole, then all processes exit 0', async () => {
    const { sigil, engine } = await serve({ limits: { shutdown_drain_ms: 0, shutdown_grace_ms: 10_000 } });
    engine.behaviour.chunkDelayMs = 150;
    const workers = workerPids(sigil.child.pid!);
    const streams = [chat(sigil, {}, true), chat(sigil, {}, true)];
    await waitFor('both streams at the engine', () => engine.requests.filter((r) => r.path === '/v1/chat/completions').length === 2);
    sigil.child.kill('SIGTERM');
    for (const answer of await Promise.all(streams)) {
      expect(answer.status).toBe(200);
      expect(answer.body.endsWith('data: [DONE]\n\n')).toBe(true);
    }
    expect(await sigil.exited).toBe(0);
    expect(sigil.logs.at(-1)).toMatchObject({ msg: 'sigil stopped' });
    // Each worker ended on its own once drained (not killed by the primary's deadline).
    const stopped = sigil.logs.filter((l) => l.msg === 'worker stopped');
    expect(stopped.map((l) => [l.worker, l.code, l.signal]).sort()).toEqual([
      [1, 0, null],
      [2, 0, null],
    ]);
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
  });

  it("never writes a key to disk nor puts one in a worker's arguments or environment", async () => {
    const { sigil } = await serve({ tls: { mode: 'self-signed' } });
    expect(readdirSync(sigil.dir).sort()).toEqual(['keys', 'models.yaml', 'sigil.yaml']);
    for (const file of readdirSync(sigil.dir)) expect(readFileSync(join(sigil.dir, file), 'utf8')).not.toMatch(/PRIVATE KEY/);
    const primary = sigil.child.pid!;
    const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean).sort();
    for (const pid of workerPids(primary)) {
      expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toBe(readFileSync(`/proc/${primary}/cmdline`, 'utf8'));
      // Only the cluster's own variables are added: the IPC channel's descriptor and mode, and the worker's id.
      expect(
        environ(pid)
          .filter((e) => !environ(primary).includes(e))
          .map((e) => e.split('=')[0])
          .sort(),
      ).toEqual(['NODE_CHANNEL_FD', 'NODE_CHANNEL_SERIALIZATION_MODE', 'NODE_UNIQUE_ID']);
    }
  });
});
