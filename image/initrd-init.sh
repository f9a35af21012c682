#!/bin/busybox sh
# The measured image's /init: open the dm-verity root named on the (measured) kernel command line, mount it
# read-only and hand over to systemd. Any failure powers the VM off: it never boots an unverified root.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# No udev in the initrd: libdevmapper makes the /dev/mapper node itself.
export DM_DISABLE_UDEV=1
die() { echo "sigil-initrd: $*" >&2; poweroff -f; }
for m in $(cat /modules.order); do insmod "/lib/modules/$m" || die "cannot load $m"; done
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    sigil.verity_roothash=*) roothash="${arg#*=}" ;;
    sigil.verity_data=*) data="${arg#*=}" ;;
    sigil.verity_hash=*) hash="${arg#*=}" ;;
  esac
done
[ -n "$roothash" ] && [ -n "$data" ] && [ -n "$hash" ] || die "the command line names no verity root hash and devices"
for i in $(seq 50); do [ -b "$data" ] && [ -b "$hash" ] && break; sleep 0.1; done
veritysetup open "$data" root "$hash" "$roothash" || die "dm-verity refused the root file system"
mkdir -p /newroot
mount -t squashfs -o ro /dev/mapper/root /newroot || die "cannot mount the verified root"
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
