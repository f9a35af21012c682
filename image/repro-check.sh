#!/usr/bin/env bash
# Builds the measured image twice, in two different directories at two different times, and compares the
# verity root hash and every digest and measurement (measurements.json). Exit 0 only if they are identical.
#   image/repro-check.sh [WORKDIR]        (root; about 17 minutes per build on two shared cores)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${1:-$(mktemp -d "${TMPDIR:-/tmp}/sigil-repro.XXXXXX")}
mkdir -p "$base/first/tmp" "$base/second/tmp"
# One epoch for both builds: a commit made between them must not count as a difference.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$(dirname "$here")" log -1 --format=%ct)}
TMPDIR="$base/first/tmp" "$here/build.sh" "$base/first/out"
sleep "${SIGIL_REPRO_PAUSE:-5}"
TMPDIR="$base/second/tmp" "$here/build.sh" "$base/second/out"
status=0
for f in root-hash cmdline measurements.json; do
  if cmp -s "$base/first/out/$f" "$base/second/out/$f"; then echo "same: $f"; else echo "DIFFERENT: $f"; diff "$base/first/out/$f" "$base/second/out/$f" || true; status=1; fi
done
echo "root hash: $(cat "$base/first/out/root-hash") / $(cat "$base/second/out/root-hash")"
exit $status
