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
# bench/run.sh's XDG folders hold its own keychains, filled with the same names: they must not be in
# the search list of these two (a lookup would find run.sh's item first).
unset XDG_DATA_HOME XDG_CONFIG_HOME
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
    # -w on the command line warns on standard error; the warning is kept for a failure only.
    A add-internet-password -U -S -a "user$target" -s "host$target.example.com" -r htps -w "changed-$round" 2> "$work/add.log" ||
        { say "round $round: the change was not stored:"; cat "$work/add.log" >&2; exit 1; }
    start=$(date +%s%N)
    A sync now > "$work/a-now.log" || { say "round $round: A's sync now failed:"; cat "$work/a-now.log" >&2; exit 1; }
    B sync now > "$work/b-now.log" || { say "round $round: B's sync now failed:"; cat "$work/b-now.log" >&2; exit 1; }
    ms "$start"
    got=$(B find-internet-password -a "user$target" -s "host$target.example.com" -w "$work/b.keychain-db") || true
    [ "$got" = "changed-$round" ] || {
        say "round $round: B has '$got', not changed-$round; A said: $(cat "$work/a-now.log"); B said: $(cat "$work/b-now.log")"
        B sync status >&2 || true
        exit 1
    }
done | sort -n | sed -n 3p | { read -r median; echo "{\"figure\": \"sync-change/ms\", \"ours\": $median}"; }
