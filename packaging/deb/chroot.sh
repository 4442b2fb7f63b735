#!/usr/bin/env bash
# A Debian release's own build root for `make deb RELEASE=...` on another release: mmdebstrap from
# this machine's mirror, with the release's development packages of the libraries the package links
# (which bring their runtime libraries and the shlibs/symbols files dpkg-shlibdeps reads, under the
# release's own package names: trixie's 64-bit time_t ones, its tpm2-tss 4), dpkg-dev and the
# release's lintian. Built once and cached under /tmp/keychain-deb-chroot/<release>-<key>/, the key
# a hash of the release, the mirror and the package list.
# Usage: packaging/deb/chroot.sh RELEASE   (as root) Prints the folder's path last; use it through
# chroot, never change it.
set -euo pipefail
release=$1
packages=(dpkg-dev lintian libsqlite3-dev libssl-dev libsodium-dev libpam0g-dev libsystemd-dev libtss2-dev)
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
mirror=${mirror:-http://deb.debian.org/debian}
security=${mirror%/debian}/debian-security
key=$(printf '%s\n' "$release" "$mirror" "${packages[@]}" | sha256sum | cut -c1-16)
cache=/tmp/keychain-deb-chroot/$release-$key
if [ ! -d "$cache/root" ]; then
    [ "$(id -u)" = 0 ] || { echo "chroot.sh: building the $release build root needs root" >&2; exit 1; }
    command -v mmdebstrap >/dev/null || { echo "chroot.sh: mmdebstrap is missing (make deb RELEASE=$release installs it)" >&2; exit 1; }
    rm -rf "$cache/root.part"
    mkdir -p "$cache"
    echo "building the $release build root from $mirror into $cache" >&2
    mmdebstrap --mode=root --format=directory --variant=apt --include="$(IFS=,; echo "${packages[*]}")" \
        --aptopt='Apt::Install-Recommends "false"' \
        "$release" "$cache/root.part" \
        "deb $mirror $release main" "deb $mirror $release-updates main" "deb $security $release-security main" >&2
    mv "$cache/root.part" "$cache/root"
fi
echo "$cache/root"
