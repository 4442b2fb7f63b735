#!/usr/bin/env bash
# A Debian guest's root file system (bookworm or trixie), as a folder built once by mmdebstrap and
# cached under /tmp/keychain-vm-cache/<release>-<key>/, the key a hash of the release, the mirror and
# the package list, so that a change of either builds a new one and a run with the same ones reuses it.
# Usage: Tests/vm/image.sh [RELEASE]   (bookworm by default) Prints the folder's path last; copy it,
# never boot it.
set -euo pipefail
release=${1:-bookworm}
# What the real boot uses: a kernel and its initramfs, systemd as init with udev (serial getty
# waits for its device), logind with the user manager and the session bus, gnome-keyring with its
# PAM module (the desktop the takeover hands over from), git for the credential helper; and the
# libraries the package links, so that installing it needs no download.
packages=(systemd systemd-sysv udev dbus dbus-user-session libpam-systemd login passwd procps kmod
    linux-image-amd64 initramfs-tools gnome-keyring libpam-gnome-keyring git keyutils
    libsqlite3-0 libsodium23 libpam0g libsystemd0)
# The rest of what the package links, by each release's names: trixie's are the 64-bit time_t
# ones, and its tpm2-tss 4 marshalling library is a package of another name.
case $release in
bookworm) packages+=(libssl3 libtss2-esys-3.0.2-0 libtss2-tctildr0 libtss2-mu0 libtss2-rc0) ;;
trixie) packages+=(libssl3t64 libtss2-esys-3.0.2-0t64 libtss2-tctildr0t64 libtss2-mu-4.0.1-0t64 libtss2-rc0t64) ;;
*) echo "image.sh: no package list for $release (bookworm, trixie)" >&2; exit 2 ;;
esac
# This machine's mirror (its sources), so the build goes where apt already goes.
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "'"$release"'" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
mirror=${mirror:-http://deb.debian.org/debian}
security=${mirror%/debian}/debian-security
key=$(printf '%s\n' "$release" "$mirror" "${packages[@]}" | sha256sum | cut -c1-16)
cache=/tmp/keychain-vm-cache/$release-$key
if [ ! -d "$cache/rootfs" ]; then
    rm -rf "$cache/rootfs.part"
    mkdir -p "$cache"
    echo "building the guest image ($release from $mirror) into $cache" >&2
    mmdebstrap --mode=root --format=directory --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" \
        --aptopt='Apt::Install-Recommends "false"' \
        --customize-hook='echo "MODULES=most" > "$1/etc/initramfs-tools/conf.d/modules"' \
        --customize-hook='chroot "$1" update-initramfs -u -k all' \
        "$release" "$cache/rootfs.part" \
        "deb $mirror $release main" "deb $mirror $release-updates main" "deb $security $release-security main" >&2
    mv "$cache/rootfs.part" "$cache/rootfs"
fi
echo "$cache/rootfs"
