#!/usr/bin/env bash
# Prints measurements.json for a built image (image/build.sh OUT): the digests of what measured direct boot
# loads and, for each VM shape in image/shapes.json, the launch measurements `sigil measure snp|tdx` computes.
#   image/measure.sh OUT
# The firmware is an input the VM host provides: SIGIL_OVMF (SEV-SNP) and SIGIL_TDVF (TDX) name the files
# (docs/image.md). Without one, or without `sigil measure`, that platform's entry says so, never a value.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=${1:?usage: image/measure.sh OUT}
# The sigil command: the built bin/sigil.js, or SIGIL_CLI (words split on spaces, e.g. a run from the sources).
sigil=(node "$repo/bin/sigil.js")
if [ -n "${SIGIL_CLI:-}" ]; then read -ra sigil <<< "$SIGIL_CLI"; fi
sha() { sha256sum "$1" | cut -d' ' -f1; }

has_measure() { "${sigil[@]}" measure --help >/dev/null 2>&1; }

# One shape's value of a shape field, or empty.
shape_field() { node -e 'const v=JSON.parse(process.argv[1])[process.argv[2]]; if (v !== undefined) console.log(String(v))' "$1" "$2"; }

# `sigil measure snp|tdx --digest` for one shape, as a JSON object of register -> hex. `sigil measure snp`
# takes the OVMF image as --ovmf and the shape as --vcpus, --vcpu-type, --vmm (lowercase) and --guest-features,
# and with --digest prints the launch digest alone; `sigil measure tdx` takes --firmware and --memory (its
# vCPU count does not enter MRTD or RTMR1/2) and with --digest prints `NAME HEX` lines (docs/measure.md).
measure() {
  local platform=$1 firmware=$2 shape=$3 args digest
  if ! has_measure; then echo '{"not_measured": "sigil measure is not in this tree"}'; return; fi
  if [ -z "$firmware" ]; then echo "{\"not_measured\": \"no firmware given (SIGIL_$( [ "$platform" = snp ] && echo OVMF || echo TDVF))\"}"; return; fi
  args=(--kernel "$out/vmlinuz" --initrd "$out/initrd.img" --append "$(cat "$out/cmdline")" --digest)
  if [ "$platform" = snp ]; then
    args+=(--ovmf "$firmware")
    local v
    v=$(shape_field "$shape" vcpus); [ -n "$v" ] && args+=(--vcpus "$v")
    v=$(shape_field "$shape" vcpu_type); [ -n "$v" ] && args+=(--vcpu-type "$v")
    v=$(shape_field "$shape" vmm); [ -n "$v" ] && args+=(--vmm "${v,,}")
    v=$(shape_field "$shape" guest_features); [ -n "$v" ] && args+=(--guest-features "$v")
    digest=$("${sigil[@]}" measure snp "${args[@]}")
    echo "{\"measurement\": \"$digest\"}"
  else
    args+=(--firmware "$firmware")
    local memory
    memory=$(shape_field "$shape" memory); [ -n "$memory" ] && args+=(--memory "$memory")
    digest=$("${sigil[@]}" measure tdx "${args[@]}")
    node -e 'const o={}; for (const l of process.argv[1].split("\n")) { const [k, v] = l.trim().split(/\s+/); if (k && v) o[k] = v; } console.log(JSON.stringify(o))' "$digest"
  fi
}

targets=()
while IFS= read -r line; do
  platform=$(node -e 'console.log(JSON.parse(process.argv[1]).platform)' "$line")
  shape=$(node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1]).shape))' "$line")
  if [ "$platform" = sev-snp ]; then m=$(measure snp "${SIGIL_OVMF:-}" "$shape"); else m=$(measure tdx "${SIGIL_TDVF:-}" "$shape"); fi
  targets+=("{\"platform\": \"$platform\", \"shape\": $shape, \"measurements\": $m}")
done < <(node -e 'for (const t of JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))) console.log(JSON.stringify(t))' "$here/shapes.json")

cat <<JSON
{
  "root_hash": "$(cat "$out/root-hash")",
  "rootfs_squashfs_sha256": "$(sha "$out/rootfs.squashfs")",
  "rootfs_verity_sha256": "$(sha "$out/rootfs.verity")",
  "model_root_hash": "$(cat "$out/model-root-hash" 2>/dev/null || echo "no model disk")",
  "model_sha256": "$(cat "$out/model-sha256" 2>/dev/null || echo "no model disk")",
  "model_img_sha256": "$( [ -f "$out/model.img" ] && sha "$out/model.img" || echo "no model disk")",
  "kernel_sha256": "$(sha "$out/vmlinuz")",
  "initrd_sha256": "$(sha "$out/initrd.img")",
  "cmdline": "$(cat "$out/cmdline")",
  "sigil_self_measurement": "$(cat "$out/self-measurement" 2>/dev/null || echo "not measured: no $out/self-measurement")",
  "targets": [
    $(IFS=,; echo "${targets[*]}")
  ]
}
JSON
