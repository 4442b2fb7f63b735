#!/usr/bin/env bash
# The cases of cases-server.sh (keychain-secret-service --kwallet answering KWallet's D-Bus API),
# until Tests/kde/run.sh, which sources every cases-*.sh, is in this branch. Each case has its own
# HOME, XDG folders, login keychain (password "pw") and session bus, whose only activatable
# services are the keychain's (org.freedesktop.secrets, org.kde.kwalletd5, org.kde.kwalletd6, all
# Exec'ing the build folder's service with --kwallet), so kwallet-query and python-keyring start
# it by D-Bus activation as on a desktop. Prompts are answered by the secret-service suite's
# scripted pinentry.
#
# KWALLET_TARGET=kwalletd5 runs the same cases against KWallet's own kwalletd5 (headless, the
# wallet opened with pamOpen as pam_kwallet5 does), to hold the cases to KWallet's behaviour;
# the cases only the keychain can pass say so and are skipped.
#
# bash Tests/kde/server-run.sh [BINDIR]   (default .build/debug)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
bus_suite_start "$@"
[ -z "$inner" ] || shift 2
export KWALLET_TARGET=${KWALLET_TARGET:-keychain} QT_QPA_PLATFORM=offscreen
kde_client() { "$py" "$here/server_client.py" "$@"; }

fresh() {
    case_dir=$(mktemp -d /tmp/kde-server-XXXXXX)
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config XDG_RUNTIME_DIR=$case_dir/run
    unset KEYCHAIN_PATH DBUS_SESSION_BUS_ADDRESS
    mkdir -m 700 "$case_dir/run" "$case_dir/services"
    printf 'pw\n' | security create-keychain >/dev/null
    local name exec="$bin/keychain-secret-service --kwallet"
    for name in org.freedesktop.secrets org.kde.kwalletd5 org.kde.kwalletd6; do
        [ "$KWALLET_TARGET" = keychain ] || { [ "$name" = org.kde.kwalletd5 ] && exec=/usr/bin/kwalletd5 || continue; }
        printf '[D-BUS Service]\nName=%s\nExec=%s\n' "$name" "$exec" > "$case_dir/services/$name.service"
    done
    sed "s|@SERVICES@|$case_dir/services|" "$here/../secret-service/session.conf" > "$case_dir/session.conf"
    export KEYCHAIN_PINENTRY=$here/../secret-service/pinentry.sh PINENTRY_ANSWERS=$case_dir/answers PINENTRY_LOG=$case_dir/pinentry.log \
        PINENTRY_RUNS=$case_dir/runs
    : > "$case_dir/answers"
}

finish() {
    local keychain
    for keychain in "$case_dir"/data/keychains/*.keychain-db; do
        [ -e "$keychain" ] && security delete-keychain "$keychain" >/dev/null 2>&1
    done
    rm -rf "$case_dir"
}

# on_bus FUNCTION ARGS...: FUNCTION in the case's private session bus, bounded in time; against
# kwalletd5, its wallet is opened first as pam_kwallet5 opens it at login.
on_bus() {
    # A pipe, not a process substitution: the case's log is read once all of it is written.
    timeout 120 dbus-run-session --config-file="$case_dir/session.conf" -- bash "$here/server-run.sh" --inner "$bin" "$@" 2>&1 \
        | { grep -v 'Failed to set fd limit\|platform plugin\|XDG_RUNTIME_DIR' || true; }
}

answers() { printf '%s\n' "$@" > "$PINENTRY_ANSWERS"; }

# confined APP COMMAND...: COMMAND in a sandbox as Flatpak makes one (a /.flatpak-info naming APP).
confined() {
    local app=$1; shift
    printf '[Application]\nname=%s\nruntime=runtime/org.example.Platform/x86_64/1\n' "$app" > "$HOME/flatpak-info-$app"
    bwrap --tmpfs / --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
        --symlink usr/sbin /sbin --ro-bind /etc /etc --proc /proc --dev /dev --bind /tmp /tmp --ro-bind "$here" "$here" \
        --ro-bind "$HOME/flatpak-info-$app" /.flatpak-info --setenv DBUS_SESSION_BUS_ADDRESS "$DBUS_SESSION_BUS_ADDRESS" \
        --unsetenv XDG_RUNTIME_DIR --chdir / -- "$@"
}

# shellcheck source=Tests/kde/cases-server.sh
. "$here/cases-server.sh"

if [ -n "$inner" ]; then
    [ "$KWALLET_TARGET" = keychain ] || kde_client pam_open pw || exit 1
    # Every command of the case counts, not only its last.
    ( set -e; "$@" )
    status=$?
    if [ "$KWALLET_TARGET" = kwalletd5 ]; then
        # kwalletd5 outlives its bus (it saves the wallet as it goes): this bus's one, by its pid.
        pid=$(busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
            GetConnectionUnixProcessID s org.kde.kwalletd5 2>/dev/null | cut -d' ' -f2)
        [ -z "$pid" ] || { kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; }
    fi
    exit $status
fi

echo "KWallet's API served by keychain-secret-service --kwallet (target: $KWALLET_TARGET)"
kde_server_cases
summary
