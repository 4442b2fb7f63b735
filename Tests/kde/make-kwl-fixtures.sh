#!/bin/bash
# Regenerates Tests/kde/kwl-fixtures (read by Tests/KWalletItemsTests): wallets written by the real kwalletd5 (Debian's
# libkf5wallet-bin), headless on a private session bus, opened as pam_kwallet5 opens them
# (org.kde.KWallet.pamOpen with PBKDF2-SHA512(password, the 56-byte salt file, 50000, 56 bytes)),
# filled through its D-Bus API, kwallet-query and its Secret Service, then closed so it writes
# the file. The legacy kinds (SHA-1 key; ECB) come from kwl-legacy-writer.py, a writer made from
# kwalletd's C++ source: kwalletd 5.103 writes the PBKDF2 kind for every wallet it can salt.
# Usage: bash Tests/kde/make-kwl-fixtures.sh [OUTPUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/kwl-fixtures}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

export HOME=$work/home XDG_DATA_HOME=$work/home/.local/share XDG_CONFIG_HOME=$work/home/.config
export XDG_RUNTIME_DIR=$work/run QT_QPA_PLATFORM=offscreen KWL_OUT=$out
mkdir -p "$XDG_DATA_HOME/kwalletd" "$XDG_CONFIG_HOME" "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
# No first-use wizard, no prompt when an application opens the wallet.
printf '[Wallet]\nFirst Use=false\nEnabled=true\nPrompt on Open=false\n' >"$XDG_CONFIG_HOME/kwalletrc"

dbus-run-session -- /usr/bin/python3 "$here/kwl-fixture-fill.py"
/usr/bin/python3 "$here/kwl-legacy-writer.py" "$out"
ls -l "$out"
