#!/usr/bin/env bash
# The sync figures of `make bench` (bench/run.sh runs this; it also runs alone):
#   bash bench/sync.sh BIN ITEMS
# A keychain of ITEMS synchronizable items starts a group on a bare repository in a temporary
# folder; a second keychain joins and is approved; then, timed: its first exchange (`sync confirm`:
# the confirmation's Argon2id, then every record
# fetched, opened and stored), and one change travelling from the first to the second through the
# remote (A's `sync now` then B's; the median of 5). Prints one JSON object per figure.
set -euo pipefail
bin=$(realpath "$1")
items=$2
work=$(mktemp -d /tmp/keychain-bench-sync-XXXXXX)
trap '"$bin/security" delete-keychain "$work/a.keychain-db" >/dev/null 2>&1 || true
      "$bin/security" delete-keychain "$work/b.keychain-db" >/dev/null 2>&1 || true
      rm -rf "$work"' EXIT
export HOME=$work GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
say() { printf '%s\n' "$*" >&2; }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
A() { KEYCHAIN_PATH=$work/a.keychain-db "$bin/security" "$@"; }
B() { KEYCHAIN_PATH=$work/b.keychain-db "$bin/security" "$@"; }

git init -q --bare "$work/remote.git"
echo "{\"figure\": \"sync-items\", \"ours\": $items}"
say "sync: filling a keychain with $items synchronizable items"
printf 'bench password\n' | "$bin/keychain-bench" fill "$work/a.keychain-db" "$items" sync
start=$(date +%s%N)
A sync init "$work/remote.git" >/dev/null
echo "{\"figure\": \"sync-init/ms\", \"ours\": $(ms "$start")}"
printf 'bench password\n' | "$bin/security" create-keychain "$work/b.keychain-db" >/dev/null 2>&1
code=$(B sync join "$work/remote.git" | sed -n 's/^code: //p')
confirmation=$(A sync approve "$code" | sed -n 's/^confirmation: //p')
say "sync: the first exchange of a new device ($items records)"
start=$(date +%s%N)
B sync confirm "$confirmation" > "$work/first.log"
echo "{\"figure\": \"sync-first/ms\", \"ours\": $(ms "$start")}"
grep -q "received $items," "$work/first.log" || { say "the new device did not receive $items items:"; cat "$work/first.log" >&2; exit 1; }
target=$((items / 2))
say "sync: one change from A to B through the remote, 5 times"
for round in 1 2 3 4 5; do
    A add-internet-password -U -S -a "user$target" -s "host$target.example.com" -r htps -w "changed-$round" 2>/dev/null
    start=$(date +%s%N)
    A sync now >/dev/null
    B sync now >/dev/null
    ms "$start"
    [ "$(B find-internet-password -a "user$target" -s "host$target.example.com" -w)" = "changed-$round" ]
done | sort -n | sed -n 3p | { read -r median; echo "{\"figure\": \"sync-change/ms\", \"ours\": $median}"; }
