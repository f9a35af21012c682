/** Reads a V8 .cpuprofile (from node --cpu-prof) and lists the functions with the most self time. */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface SelfTime {
  name: string;
  where: string;
  ms: number;
  percent: number;
}

export function topSelfTime(file: string, root: string, limit = 30): { totalMs: number; idleMs: number; top: SelfTime[] } {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, { name: string; where: string; us: number }>();
  let total = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    const node = byId.get(id);
    if (node === undefined) return;
    total += dt;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') idle += dt;
    const shortUrl = url.startsWith('file://') ? relative(root, new URL(url).pathname) : url;
    const where = shortUrl === '' ? '' : `${shortUrl}:${lineNumber + 1}`;
    const key = `${functionName}@${where}`;
    const entry = self.get(key) ?? { name: functionName || '(anonymous)', where, us: 0 };
    entry.us += dt;
    self.set(key, entry);
  });
  const busy = total - idle;
  const top = [...self.values()]
    .filter((e) => e.name !== '(idle)')
    .sort((a, b) => b.us - a.us)
    .slice(0, limit)
    .map((e) => ({ name: e.name, where: e.where, ms: e.us / 1000, percent: busy > 0 ? (100 * e.us) / busy : 0 }));
  return { totalMs: total / 1000, idleMs: idle / 1000, top };
}

/** `units` requests (or streams) were served while sampling: self time is also shown per unit, in µs. */
export function renderProfile(title: string, summary: ReturnType<typeof topSelfTime>, units: number, unit: string): string {
  const busy = summary.totalMs - summary.idleMs;
  const L = [
    `### ${title}`,
    '',
    `Sampled ${summary.totalMs.toFixed(0)} ms, busy ${busy.toFixed(0)} ms (start-up included) for ${units} ${unit}s: ${((busy * 1000) / units).toFixed(1)} µs of main-thread time per ${unit}.`,
    '',
    `| self µs per ${unit} | % busy | function | where |`,
    '|---|---|---|---|',
  ];
  for (const e of summary.top) L.push(`| ${((e.ms * 1000) / units).toFixed(2)} | ${e.percent.toFixed(1)} | ${e.name} | ${e.where} |`);
  return L.join('\n') + '\n';
}
