import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';

/**
 * The Kubernetes example (deploy/kubernetes) as `sigil serve` would read it on the confidential nodes it
 * targets, checked by `sigil config check --tee` on this machine: its ConfigMap's sigil.yaml and
 * models.yaml and its Secret's keys file, at the paths the pod mounts them (moved under a temporary folder).
 */
const DEPLOY = join(import.meta.dirname, '../../deploy/kubernetes');
const manifests = (file: string) => parseAllDocuments(readFileSync(join(DEPLOY, file), 'utf8')).map((d) => d.toJS() as Record<string, unknown>);

function exampleDir(): string {
  const root = mkdtempSync(join(tmpdir(), 'sigil-k8s-'));
  const config = manifests('sigil-config.yaml').find((m) => m.kind === 'ConfigMap')!.data as Record<string, string>;
  const keys = manifests('sigil-api-keys.yaml').find((m) => m.kind === 'Secret')!.stringData as Record<string, string>;
  mkdirSync(join(root, 'etc/sigil/keys'), { recursive: true });
  writeFileSync(join(root, 'etc/sigil/sigil.yaml'), config['sigil.yaml']!.split('/etc/sigil/').join(`${root}/etc/sigil/`));
  writeFileSync(join(root, 'etc/sigil/models.yaml'), config['models.yaml']!);
  writeFileSync(join(root, 'etc/sigil/keys/api-keys'), keys['api-keys']!);
  return join(root, 'etc/sigil/sigil.yaml');
}

const check = (args: string[]) => spawnSync(process.execPath, [...SIGIL_FROM_SOURCES, 'config', 'check', ...args], { encoding: 'utf8', timeout: 30_000 });

describe('the Kubernetes example', () => {
  it.each(['tdx', 'sev-snp'])('passes sigil config check as on a %s node', (tee) => {
    const result = check(['--config', exampleDir(), '--tee', tee]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain(`checked as on a ${tee} machine`);
    // Its model_hash is the all-zero placeholder until the operator hashes the weights: said, not passed silently.
    expect(result.stdout).toContain(
      '  warning: model llama-3.1-8b-instruct: model_hash is the all-zero placeholder, so receipts would name no real weights: put what `sigil hash-model PATH` prints for them\n',
    );
  });

  it('serves HTTPS end to end: probes and Service use the TLS port', () => {
    const deployment = manifests('sigil-vllm.yaml').find((m) => m.kind === 'Deployment' || m.kind === 'StatefulSet')!;
    const containers = (deployment.spec as { template: { spec: { containers: Array<Record<string, unknown>> } } }).template.spec.containers;
    const sigil = containers.find((c) => c.name === 'sigil')!;
    for (const probe of ['readinessProbe', 'livenessProbe']) expect((sigil[probe] as { httpGet: { scheme?: string } }).httpGet.scheme).toBe('HTTPS');
    const service = manifests('sigil-service.yaml').find((m) => m.kind === 'Service')!;
    expect((service.spec as { ports: Array<{ port: number }> }).ports.map((p) => p.port)).toEqual([443]);
  });
});

describe('sigil config check --tee', () => {
  it('names what serve would refuse on that TEE: plaintext, an engine outside the VM, another provider', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tee-check-'));
    writeFileSync(join(dir, 'keys'), '');
    writeFileSync(
      join(dir, 'sigil.yaml'),
      'auth: {keys_file: keys}\nattestation: {provider: sev-snp}\nupstreams: {far: {url: "http://10.0.0.9:8000/v1"}}\ncatalogue: models.yaml\n',
    );
    writeFileSync(join(dir, 'models.yaml'), 'models: []\n');
    const result = check(['--config', join(dir, 'sigil.yaml'), '--tee', 'tdx']);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('attestation.provider: sev-snp cannot start on a tdx machine');
    expect(result.stderr).toContain('tls.mode is off on a tdx machine');
    expect(result.stderr).toContain('upstreams.far: http://10.0.0.9:8000/v1 is outside this confidential VM');
    expect(check(['--config', join(dir, 'sigil.yaml'), '--tee', 'sgx']).status).toBe(2);
  });
});

describe('the Kubernetes example is sized and complete', () => {
  const deployment = () => manifests('sigil-vllm.yaml').find((m) => m.kind === 'Deployment' || m.kind === 'StatefulSet')!;
  const containers = () => (deployment().spec as { template: { spec: { containers: Array<Record<string, unknown>> } } }).template.spec.containers;

  it('sets workers, and a memory limit that holds the primary and every worker at 120 MB each with half again for bursts', () => {
    const config = manifests('sigil-config.yaml').find((m) => m.kind === 'ConfigMap')!.data as Record<string, string>;
    const workers = Number(/^workers: (\d+)$/m.exec(config['sigil.yaml']!)?.[1]);
    expect(workers).toBe(4);
    const sigil = containers().find((c) => c.name === 'sigil')!;
    const limit = (sigil.resources as { limits: { memory: string } }).limits.memory;
    expect(limit).toBe('1536Mi');
    expect(Number(limit.replace('Mi', ''))).toBeGreaterThanOrEqual(((workers + 1) * 120 * 1.5 * 1e6) / 2 ** 20);
  });

  it('gives vLLM the Hugging Face token the gated Llama model needs, from a Secret', () => {
    const vllm = containers().find((c) => c.name === 'vllm')!;
    expect(vllm.args).toContain('--model=meta-llama/Llama-3.1-8B-Instruct');
    expect(vllm.env).toEqual([{ name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: 'hf-token', key: 'token' } } }]);
  });
});
