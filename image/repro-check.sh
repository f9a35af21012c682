#!/usr/bin/env bash
# Builds the measured image twice, in two different directories at two different times, the second on a host with
# another /etc/resolv.conf and host name (a private mount and UTS namespace), and compares the verity root hash and
# every digest and measurement (measurements.json). Exit 0 only if they are identical.
#   image/repro-check.sh [WORKDIR]        (root; 2.5 to 17 minutes per build on two shared cores)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${1:-$(mktemp -d "${TMPDIR:-/tmp}/sigil-repro.XXXXXX")}
mkdir -p "$base/first/tmp" "$base/second/tmp"
# One epoch for both builds: a commit made between them must not count as a difference.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$(dirname "$here")" log -1 --format=%ct)}
TMPDIR="$base/first/tmp" "$here/build.sh" "$base/first/out"
sleep "${SIGIL_REPRO_PAUSE:-5}"
# The host's resolver file with one more line (so apt still resolves the mirror) and another host name: a root that
# kept either would differ.
{ cat /etc/resolv.conf; echo '# sigil repro-check: a different host resolv.conf'; } >"$base/resolv.conf"
echo "second build: a different host /etc/resolv.conf and host name"
TMPDIR="$base/second/tmp" unshare --mount --uts sh -c 'mount --bind "$1" /etc/resolv.conf && hostname sigil-repro-other-host && exec "$2" "$3"' \
  sh "$base/resolv.conf" "$here/build.sh" "$base/second/out"
status=0
for f in root-hash cmdline measurements.json; do
  if cmp -s "$base/first/out/$f" "$base/second/out/$f"; then echo "same: $f"; else echo "DIFFERENT: $f"; diff "$base/first/out/$f" "$base/second/out/$f" || true; status=1; fi
done
echo "root hash: $(cat "$base/first/out/root-hash") / $(cat "$base/second/out/root-hash")"
exit $status
