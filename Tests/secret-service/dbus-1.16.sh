#!/usr/bin/env bash
# A dbus-daemon that answers GetConnectionCredentials with ProcessFD (1.15.8 and later): Debian
# 13's, from the trixie root that Tests/trixie/chroot.sh builds once and caches (one root for both
# suites), run on this machine by its own dynamic loader and libraries, so the bus serves host
# programs from host paths.
# Usage: Tests/secret-service/dbus-1.16.sh   Prints the path of a program that runs that
# dbus-daemon (for `dbus-run-session --dbus-daemon=`); exits 1 when it cannot be had (no
# mmdebstrap, not root, no mirror).
set -euo pipefail
# shellcheck source=Tests/trixie/chroot.sh
. "$(dirname "$0")/../trixie/chroot.sh"
[ "$(id -u)" = 0 ] || { echo "building the root needs root" >&2; exit 1; }
root=$(trixie_root) || exit 1
wrapper=$(dirname "$root")/dbus-daemon-1.16
if [ ! -x "$wrapper" ]; then
    # Its loader with its libraries only: what it starts (the service) gets the host's again.
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$root/lib64/ld-linux-x86-64.so.2" \
        "$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/dbus-daemon" > "$wrapper.part.$$"
    chmod 755 "$wrapper.part.$$"
    mv "$wrapper.part.$$" "$wrapper"
fi
"$wrapper" --version | grep -Eq 'Daemon 1\.(1[6-9]|[2-9][0-9])\.' || { echo "$wrapper is not 1.16 or later" >&2; exit 1; }
echo "$wrapper"
