#!/usr/bin/env bash
# The main job end to end, on a throwaway keychain: create, unlock, add, find, lock (WhenUnlocked
# refused, AfterFirstUnlock still served), unlock again. Nothing outside a temporary folder and the
# demo keychain's own kernel keys is touched, and those are removed at the end.
set -uo pipefail
security=$(realpath "${1:-.build/debug/security}")
home=$(mktemp -d /tmp/keychain-demo-XXXXXX)
export XDG_DATA_HOME=$home/data XDG_CONFIG_HOME=$home/config HOME=$home
unset KEYCHAIN_PATH
cleanup() { "$security" delete-keychain demo >/dev/null 2>&1; rm -rf "$home"; }
trap cleanup EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
# Shows a command as a user types it, runs it, and shows its exit status.
run() {
    local shown="security" arg
    for arg in "${@:2}"; do shown+=" $(printf '%q' "$arg")"; done
    step "$shown"
    "$@"
    echo "(exit $?)"
}

step "security create-keychain demo   # password from standard input, never in argv"
printf 'demo password\n' | "$security" create-keychain demo && echo "(exit 0)"
run "$security" default-keychain -s demo
step "security add-internet-password -a alice -s git.example.com -r htps -w   # -w last: the password from standard input"
printf 'when-unlocked secret\n' | "$security" add-internet-password -a alice -s git.example.com -r htps -w && echo "(exit 0)"
step "security add-generic-password -a ci-bot -s deploy-token --accessibility afterFirstUnlock -w"
printf 'after-first-unlock secret\n' | "$security" add-generic-password -a ci-bot -s deploy-token --accessibility afterFirstUnlock -w && echo "(exit 0)"
run "$security" find-internet-password -s git.example.com -w
run "$security" find-generic-password -s deploy-token -w
run "$security" status
run "$security" lock-keychain
run "$security" find-internet-password -s git.example.com -w
run "$security" find-generic-password -s deploy-token -w
step "security unlock-keychain   # password from standard input"
printf 'demo password\n' | "$security" unlock-keychain && echo "(exit 0)"
run "$security" find-internet-password -s git.example.com -w
step "what a thief copying the file finds of the server, accounts, services and passwords:"
found=$(cat "$XDG_DATA_HOME"/keychains/demo.keychain-db* | strings -n 5 | grep -E 'git\.example\.com|alice|ci-bot|deploy-token|when-unlocked|after-first-unlock')
echo "${found:-(none of them: attributes and secrets are encrypted at rest)}"
[ -z "$found" ]
