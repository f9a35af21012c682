#!/bin/busybox sh
# The measured image's /init: open the dm-verity root and model disk named on the (measured) kernel command line,
# read each in full (so a corrupted block stops the boot here, not when a file is first read), mount them read-only,
# mount the operator's configuration disk read-only when there is one, and hand over to systemd. Both verity devices
# panic on corruption (panic=-1 reboots at once; the test VMM's -no-reboot then stops), and any other failure powers
# the VM off: it never runs on an unverified root or model.
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
    sigil.model_disk=*) model="${arg#*=}" ;;
    sigil.model_roothash=*) modelhash="${arg#*=}" ;;
    sigil.model_hash_offset=*) modeloffset="${arg#*=}" ;;
    sigil.config_disk=*) config="${arg#*=}" ;;
  esac
done
[ -n "$roothash" ] && [ -n "$data" ] && [ -n "$hash" ] || die "the command line names no verity root hash and devices"
[ -n "$model" ] && [ -n "$modelhash" ] && [ -n "$modeloffset" ] || die "the command line names no model disk and root hash"
for i in $(seq 50); do [ -b "$data" ] && [ -b "$hash" ] && [ -b "$model" ] && break; sleep 0.1; done
veritysetup open --panic-on-corruption "$data" root "$hash" "$roothash" || die "dm-verity refused the root file system"
veritysetup open --panic-on-corruption --hash-offset="$modeloffset" "$model" model "$model" "$modelhash" || die "dm-verity refused the model disk"
echo "sigil-initrd: reading the verified root and model in full"
dd if=/dev/mapper/root of=/dev/null bs=1048576 2>/dev/null || die "the root file system does not match its root hash"
dd if=/dev/mapper/model of=/dev/null bs=1048576 2>/dev/null || die "the model disk does not match its root hash"
mkdir -p /newroot
mount -t squashfs -o ro /dev/mapper/root /newroot || die "cannot mount the verified root"
mount -t squashfs -o ro /dev/mapper/model /newroot/models || die "cannot mount the verified model disk"
# The configuration disk is not verified: Sigil measures the configuration it reads from it (docs/image.md).
if [ -n "$config" ] && [ -b "$config" ]; then
  mount -t squashfs -o ro,nodev,nosuid,noexec "$config" /newroot/config || die "cannot mount the configuration disk $config"
fi
echo "sigil-initrd: verified root $roothash and model $modelhash; starting systemd"
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
