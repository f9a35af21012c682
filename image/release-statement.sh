#!/usr/bin/env bash
# Prints the release manifest's predicate (docs/release.md) for a built and measured image:
#   image/release-statement.sh OUT TAG > predicate.json
# Inputs besides OUT/measurements.json: SIGIL_OVMF / SIGIL_TDVF (the firmware files measured, hashed here),
# SIGIL_OVMF_SOURCE / SIGIL_TDVF_SOURCE (where their hash comes from, in words or a URL),
# SIGIL_SELF_MEASUREMENT (the manifest_sha384 `sigil measure self` prints for the image and its shipped configuration;
# default: the one image/build.sh computed, from measurements.json) and
# SIGIL_RELEASE_DAYS (validity, default 30). A platform without measurements is left out; none at all fails.
set -euo pipefail
out=${1:?usage: image/release-statement.sh OUT TAG}
tag=${2:?usage: image/release-statement.sh OUT TAG}
SIGIL_SELF_MEASUREMENT=${SIGIL_SELF_MEASUREMENT:-$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).sigil_self_measurement ?? "")' "$out/measurements.json")}
[[ "$SIGIL_SELF_MEASUREMENT" =~ ^[0-9a-f]{96}$ ]] || { echo "image/release-statement.sh: no self-measurement (measurements.json says \"$SIGIL_SELF_MEASUREMENT\"): set SIGIL_SELF_MEASUREMENT to the manifest_sha384 sigil measure self prints (docs/auditing.md)" >&2; exit 1; }
export SIGIL_SELF_MEASUREMENT
fw() { [ -n "${1:-}" ] && sha384sum "$1" | cut -d' ' -f1 || true; }
OVMF_SHA384=$(fw "${SIGIL_OVMF:-}") TDVF_SHA384=$(fw "${SIGIL_TDVF:-}") TAG=$tag node - "$out/measurements.json" <<'JS'
const fs = require('node:fs');
const m = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const env = process.env;
const firmware = {
  'sev-snp': { name: env.SIGIL_OVMF ? require('node:path').basename(env.SIGIL_OVMF) : '', sha384: env.OVMF_SHA384, source: env.SIGIL_OVMF_SOURCE ?? '' },
  tdx: { name: env.SIGIL_TDVF ? require('node:path').basename(env.SIGIL_TDVF) : '', sha384: env.TDVF_SHA384, source: env.SIGIL_TDVF_SOURCE ?? '' },
};
const targets = m.targets
  .filter((t) => t.measurements.not_measured === undefined)
  .map((t) => {
    // image/measure.sh records `sigil measure --digest`: register name -> hex (SEV-SNP: measurement; TDX: mrtd, rtmr1, rtmr2).
    const allowed = t.platform === 'sev-snp' ? ['measurement'] : ['mrtd', 'rtmr0', 'rtmr1', 'rtmr2'];
    const measurements = Object.fromEntries(Object.entries(t.measurements).filter(([k]) => allowed.includes(k)));
    if (Object.keys(measurements).length === 0) {
      console.error(`image/release-statement.sh: ${t.platform} lists no ${allowed.join('/')} in measurements.json`);
      process.exit(1);
    }
    return { platform: t.platform, shape: t.shape, firmware: firmware[t.platform], measurements };
  });
if (targets.length === 0) {
  console.error('image/release-statement.sh: no platform was measured: ' + m.targets.map((t) => `${t.platform}: ${t.measurements.not_measured}`).join('; '));
  process.exit(1);
}
const days = Number(env.SIGIL_RELEASE_DAYS ?? 30);
const predicate = {
  version: env.TAG.replace(/^v/, ''),
  expires: new Date(Date.now() + days * 86400000).toISOString().replace(/\.\d+Z$/, 'Z'),
  image: { root_hash: m.root_hash },
  sigil_self_measurement: env.SIGIL_SELF_MEASUREMENT,
  targets,
};
process.stdout.write(JSON.stringify(predicate, null, 2) + '\n');
JS
