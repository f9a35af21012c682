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
sigil=(node "$repo/bin/sigil.js")
sha() { sha256sum "$1" | cut -d' ' -f1; }

has_measure() { "${sigil[@]}" measure --help >/dev/null 2>&1; }

# One platform's measurements for one shape, as the JSON of the reference-values file `sigil measure` prints.
measure() {
  local platform=$1 firmware=$2 shape=$3
  if ! has_measure; then echo '{"not_measured": "sigil measure is not in this tree"}'; return; fi
  if [ -z "$firmware" ]; then echo "{\"not_measured\": \"no firmware given (SIGIL_$( [ "$platform" = snp ] && echo OVMF || echo TDVF))\"}"; return; fi
  # shellcheck disable=SC2046
  "${sigil[@]}" measure "$platform" --firmware "$firmware" --kernel "$out/vmlinuz" --initrd "$out/initrd.img" \
    --append "$(cat "$out/cmdline")" $(node -e 'const s=JSON.parse(process.argv[1]); console.log(Object.entries(s).filter(([k])=>k!=="name").map(([k,v])=>`--${k.replaceAll("_","-")} ${v}`).join(" "))' "$shape") \
    --format json
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
  "kernel_sha256": "$(sha "$out/vmlinuz")",
  "initrd_sha256": "$(sha "$out/initrd.img")",
  "cmdline": "$(cat "$out/cmdline")",
  "targets": [
    $(IFS=,; echo "${targets[*]}")
  ]
}
JSON
