#!/usr/bin/env bash
# A Debian 13 (trixie) root file system with Debian 13's own programs that the project meets on a
# trixie desktop: KDE's kwalletd6 (package kwallet6), gnome-keyring 48 with gcr4's gcr-ssh-agent,
# OpenSSH 10, dbus 1.16 and systemd's user units. Built once by mmdebstrap and cached under
# /tmp/keychain-trixie-cache/<key>/, the key a hash of the release, the mirror and the package
# list, so that a change of either builds a new one and a run with the same ones reuses it.
#
# Usage: Tests/trixie/chroot.sh [EXTRA-PACKAGE...]   Prints the root's path last (on stdout), or
# exits 3 with the reason on stderr when it cannot be built here (no mmdebstrap, no mirror).
# Others may source it and call `trixie_root [EXTRA-PACKAGE...]` instead. Use the root read-only
# or through bind mounts (Tests/trixie/run.sh): every caller shares it.

# The packages, sorted into one list so that the key does not depend on their order.
# libqca-qt6-plugins: kwalletd6's Secret Service needs its OpenSSL plugin for the session's
# Diffie-Hellman ("createDLGroup failed") yet kwallet6 does not even recommend it; a Plasma
# desktop has it through its other packages.
trixie_packages=(kwallet6 libqca-qt6-plugins gnome-keyring gcr4 gcr openssh-client openssh-server dbus-daemon dbus-bin
    python3-dbus python3-gi python3-secretstorage libsecret-tools systemd procps passwd libsqlite3-0 libssl3t64 libsodium23 libsystemd0)

# The mirror this machine's apt uses (deb822 sources or a one-line list), so that the build goes
# where apt already goes; TRIXIE_MIRROR names another.
trixie_mirror() {
    local mirror=${TRIXIE_MIRROR:-}
    [ -z "$mirror" ] || { echo "$mirror"; return; }
    mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -1)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
    echo "${mirror:-http://deb.debian.org/debian}"
}

trixie_root() {
    local release=trixie mirror key cache packages
    packages=$(printf '%s\n' "${trixie_packages[@]}" "$@" | sort -u)
    mirror=$(trixie_mirror)
    key=$(printf '%s\n' "$release" "$mirror" "$packages" | sha256sum | cut -c1-16)
    cache=/tmp/keychain-trixie-cache/$key
    # Made whole or not at all (renamed into place once built): no lock needed to use it.
    [ ! -d "$cache/rootfs" ] || { echo "$cache/rootfs"; return 0; }
    command -v mmdebstrap >/dev/null || { echo "no mmdebstrap (apt-get install mmdebstrap)" >&2; return 3; }
    mkdir -p "$cache"
    # One builder at a time per key: a second caller waits for the first and then reuses its root.
    exec {lock}>"$cache/lock"
    if ! timeout 900 flock "$lock"; then
        echo "the trixie root at $cache stayed locked for 15 minutes" >&2
        exec {lock}>&-
        return 3
    fi
    if [ ! -d "$cache/rootfs" ]; then
        # A mirror that does not answer is a reason to skip, not to fail.
        if ! timeout 30 curl -fsI "$mirror/dists/$release/InRelease" >/dev/null 2>&1; then
            echo "the mirror $mirror has no $release (or does not answer)" >&2
            exec {lock}>&-
            return 3
        fi
        rm -rf "$cache/rootfs.part"
        echo "building the $release root ($mirror) into $cache: a few minutes, once" >&2
        if ! timeout 1200 mmdebstrap --mode=root --format=directory --variant=minbase \
            --include="$(paste -sd, <<< "$packages")" \
            --aptopt='Apt::Install-Recommends "false"' \
            --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            "$release" "$cache/rootfs.part" "deb $mirror $release main" >&2; then
            rm -rf "$cache/rootfs.part"
            echo "mmdebstrap could not build the $release root" >&2
            exec {lock}>&-
            return 3
        fi
        mv "$cache/rootfs.part" "$cache/rootfs"
    fi
    exec {lock}>&-
    echo "$cache/rootfs"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -uo pipefail
    trixie_root "$@"
fi
