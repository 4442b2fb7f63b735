#!/usr/bin/env bash
# The .kwl import cases of the KDE suite (cases-kwl.sh) on a runner of their own, until the
# suite's Tests/kde/run.sh sources them. Each case has its own HOME and XDG folders; no daemon is
# needed (the wallets in kwl-fixtures were written by the real kwalletd5).
# Usage: bash Tests/kde/kwl-run.sh [BUILD_DIR]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
bin=$(realpath "${1:-.build/debug}")
export PATH="$bin:$PATH"
inner=

fresh() {
    case_dir=$(mktemp -d /tmp/kde-kwl-XXXXXX)
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config XDG_RUNTIME_DIR=$case_dir/run
    mkdir -p "$XDG_RUNTIME_DIR" "$XDG_DATA_HOME" && chmod 700 "$XDG_RUNTIME_DIR"
    unset KEYCHAIN_PATH DBUS_SESSION_BUS_ADDRESS
}

finish() {
    local keychain
    for keychain in "$case_dir"/data/keychains/*.keychain-db; do
        [ -e "$keychain" ] && security delete-keychain "$keychain" >/dev/null 2>&1
    done
    rm -rf "$case_dir"
}

# shellcheck source=Tests/kde/cases-kwl.sh
. "$here/cases-kwl.sh"
summary
