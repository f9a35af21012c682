#!/usr/bin/env bash
# Makes the operator's configuration disk from a folder: a read-only squashfs (no loop device, no root needed), the
# same bytes for the same files. The folder holds sigil.yaml and what it names (catalogue, API key hashes), with
# paths relative to it or absolute under /config, where the image mounts the disk (docs/image.md).
#   image/config-disk.sh DIR OUT.img
set -euo pipefail
dir=${1:?usage: image/config-disk.sh DIR OUT.img}
out=${2:?usage: image/config-disk.sh DIR OUT.img}
command -v mksquashfs >/dev/null || { echo 'image/config-disk.sh: mksquashfs is missing (apt-get install squashfs-tools)' >&2; exit 3; }
[ -f "$dir/sigil.yaml" ] || { echo "image/config-disk.sh: $dir has no sigil.yaml" >&2; exit 2; }
# Fixed times and owner: the disk is a function of the files' names, modes and contents.
SOURCE_DATE_EPOCH=0 mksquashfs "$dir" "$out" -noappend -quiet -no-progress -all-root -comp zstd >/dev/null
