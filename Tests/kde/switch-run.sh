#!/usr/bin/env bash
# The switching cases of the KDE suite (cases-switch.sh) on a runner of their own, until the
# suite's Tests/kde/run.sh sources them. As Tests/desktop/run.sh: each case has its own HOME, XDG
# folders and XDG_RUNTIME_DIR and its own session bus, whose service folders are the user's
# (~/.local/share/dbus-1/services, where enable writes) and a "system" one holding kwalletd5's
# activation file, as on a Debian KDE desktop. No systemd user manager runs here; the units
# enable looks for are where $SYSTEMD_UNIT_PATH says (ours, and pam_kwallet's as
# libpam-kwallet-common names it). kwalletd5 and KeePassXC run headless (QT_QPA_PLATFORM=offscreen).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
self=$here/$(basename "${BASH_SOURCE[0]}")

# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
bus_suite_start "$@"
[ -z "$inner" ] || shift 2

fresh() {
    user_case_start /tmp/kde-switch-XXXXXX
    export QT_QPA_PLATFORM=offscreen
    [ ! -f /usr/share/dbus-1/services/org.kde.kwalletd5.service ] ||
        cp /usr/share/dbus-1/services/org.kde.kwalletd5.service "$case_dir/system/services/"
}

finish() { user_case_finish; }

on_bus() { user_case_bus "$self" "$@"; }

# shellcheck source=Tests/kde/cases-switch.sh
. "$here/cases-switch.sh"

if [ -n "$inner" ]; then
    set -e
    [ -z "${KDE_TRACE:-}" ] || set -x
    "$@"
    exit
fi
summary
