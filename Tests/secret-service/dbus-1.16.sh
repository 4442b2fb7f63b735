#!/usr/bin/env bash
# A dbus-daemon that answers GetConnectionCredentials with ProcessFD (1.15.8 and later): Debian
# 13's, from a folder built once by mmdebstrap and cached under /tmp/keychain-dbus116-cache/<key>/
# (the key a hash of the release, the mirror and the packages), run on this machine by its own
# dynamic loader and libraries, so the bus serves host programs from host paths.
# Usage: Tests/secret-service/dbus-1.16.sh   Prints the path of a program that runs that
# dbus-daemon (for `dbus-run-session --dbus-daemon=`); exits 1 when it cannot be had (no
# mmdebstrap, not root, no network).
set -euo pipefail
release=trixie
packages=(dbus-daemon)
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
key=$(printf '%s\n' "$release" "$mirror" "${packages[@]}" | sha256sum | cut -c1-16)
cache=/tmp/keychain-dbus116-cache/$key
if [ ! -x "$cache/dbus-daemon" ]; then
    command -v mmdebstrap >/dev/null || { echo "mmdebstrap is not installed" >&2; exit 1; }
    [ "$(id -u)" = 0 ] || { echo "building the root needs root" >&2; exit 1; }
    rm -rf "$cache/rootfs.part"
    mkdir -p "$cache"
    echo "building Debian's $release dbus-daemon from $mirror into $cache" >&2
    mmdebstrap --mode=root --format=directory --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" \
        --aptopt='Apt::Install-Recommends "false"' "$release" "$cache/rootfs.part" "deb $mirror $release main" \
        > "$cache/build.log" 2>&1 || { echo "mmdebstrap failed (see $cache/build.log)" >&2; exit 1; }
    rm -rf "$cache/rootfs"
    mv "$cache/rootfs.part" "$cache/rootfs"
    root=$cache/rootfs
    # Its loader with its libraries only: what it starts (the service) gets the host's again.
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$root/lib64/ld-linux-x86-64.so.2" \
        "$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/dbus-daemon" > "$cache/dbus-daemon.part"
    chmod 755 "$cache/dbus-daemon.part"
    mv "$cache/dbus-daemon.part" "$cache/dbus-daemon"
fi
"$cache/dbus-daemon" --version | grep -Eq 'Daemon 1\.(1[6-9]|[2-9][0-9])\.' || { echo "$cache/dbus-daemon is not 1.16 or later" >&2; exit 1; }
echo "$cache/dbus-daemon"
