#!/usr/bin/env bash
# make bench's broker figures (called by bench/run.sh; runs alone too, as root): the same release
# build with its class keys in the kernel keyring and in keychain-broker's keeping, side by side.
# The broker runs as in the suites (Tests/broker-lib.sh): a throwaway system user (group tss),
# setpriv with CAP_SYS_PTRACE only, a socket under /run (a program under /tmp is never identified,
# and the reader must be, as an installed program is). The reader is a throwaway ordinary user
# running copies of the binaries in a root-owned 0755 folder, named to the broker with --own-program;
# every item is made by the program that reads it, so no read may ask: the answerer denies and
# writes down any question, and one question fails the figures.
#   - SecItemCopyMatching returning data (`keychain-bench reads N`), kernel and broker runs in turn,
#     and between them the floor under any broker that checks its caller per read
#     (bench/broker_floor.c: a round trip to another process that reads the caller's status);
#   - N items read in a row by the program that made them (the same runs);
#   - the git helper's `get` through the broker, in the kernel keyring, and credential-store's
#     (timing.py, cases in turn).
# Writes WORK/broker-kernel.txt, WORK/broker-broker.txt and WORK/broker-floor.txt (`name value`
# lines, one set a run),
# WORK/broker-helper.json (timing.py's medians); without root, WORK/broker-skipped.txt instead.
#
#   bench/broker.sh BIN WORK   BIN: keychain-broker, keychain-bench, git-credential-keychain and
#                              security (release); BENCH_STORE_ITEMS (10000), BENCH_ROUNDS (40),
#                              BENCH_BROKER_RUNS (3: keychain-bench runs per custody)
set -euo pipefail
bin=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
items=${BENCH_STORE_ITEMS:-10000}
rounds=${BENCH_ROUNDS:-40}
runs=${BENCH_BROKER_RUNS:-3}
target=$((items / 2))

if [ "$(id -u)" != 0 ]; then
    echo "broker figures: skipped (they need root, to make the broker's system user and a user whose keychain it keeps)" > "$work/broker-skipped.txt"
    exit 0
fi
for tool in setpriv keyctl useradd setsid git python3 gcc; do
    command -v "$tool" >/dev/null || { echo "bench/broker.sh: $tool is missing" >&2; exit 1; }
done

# shellcheck source=Tests/broker-lib.sh
. "$here/../Tests/broker-lib.sh"
user=kcbbu$$
cleanup() {
    # Every step, whatever the one before returned (the broker's wait returns 143, its SIGTERM).
    set +e
    broker_stop
    client_teardown "$user"
    broker_teardown
}
trap cleanup EXIT

broker_setup "kcbb$$" kc-bench-broker
dir=$broker_dir socket=$broker_socket
client_setup "$user" "$dir/home"
mkdir -p "$dir/home"
broker_copy "$bin" keychain-broker keychain-bench git-credential-keychain security
cp "$here/timing.py" "$dir/bin/"
gcc -O2 -Wall -o "$dir/bin/broker_floor" "$here/broker_floor.c"
# The answerer of every question (KEYCHAIN_ACCESS_ANSWERER): writes it down and denies.
printf '#!/bin/sh\ncat >> %s/home/questions\nprintf "deny\\n"\n' "$dir" > "$dir/bin/answer-deny"
chmod 755 "$dir/bin"/*
chown "$user:" "$dir/home"
chmod 700 "$dir/home"

own=()
for program in keychain-bench git-credential-keychain security; do own+=(--own-program "$dir/bin/$program"); done
broker_start "${own[@]}" || { echo "bench/broker.sh: the broker did not start"; exit 1; }

# as_user [VAR=VALUE]... COMMAND...: as the reader, in a keyring session of its own, without a
# terminal (so the answerer is the only one who could be asked).
as_user() {
    setsid -w setpriv --reuid="$user" --regid="$user" --init-groups keyctl session - \
        env -i PATH=/usr/bin:/bin HOME="$dir/home" GIT_CONFIG_NOSYSTEM=1 KEYCHAIN_ACCESS_ANSWERER="$dir/bin/answer-deny" "$@" </dev/null
}
no_questions() {
    if [ -e "$dir/home/questions" ]; then
        echo "bench/broker.sh: the broker asked about a read by its trusted program ($1):"
        cat "$dir/home/questions"
        exit 1
    fi
}

# --- SecItemCopyMatching and N reads in a row, each custody in turn ---------------------------
for _ in $(seq "$runs"); do
    as_user "$dir/bin/keychain-bench" reads "$items" > "$dir/kernel.out"
    grep -qx 'custody kernel' "$dir/kernel.out"
    grep -v '^custody ' "$dir/kernel.out" >> "$work/broker-kernel.txt"
    as_user KEYCHAIN_BROKER_SOCKET="$socket" "$dir/bin/keychain-bench" reads "$items" > "$dir/broker.out"
    grep -qx 'custody broker' "$dir/broker.out"
    grep -v '^custody ' "$dir/broker.out" >> "$work/broker-broker.txt"
    no_questions "keychain-bench reads"
    "$dir/bin/broker_floor" >> "$work/broker-floor.txt"
done

# --- the git helper's get: through the broker, in the kernel keyring, and credential-store -----
# One keychain of N internet passwords whose list trusts the helper's copy (as its own `store`
# writes, without the parent rule: timing.py, not git, starts it here), unlocked both in this
# session's kernel keyring (fill) and in the broker (unlock-keychain through it).
keychain=$dir/home/helper.keychain-db
for ((i = 0; i < items; i++)); do
    printf 'https://user%d:pass%d@host%d.example.com\n' "$i" "$i" "$i"
done > "$dir/home/credential-store"
chown "$user:" "$dir/home/credential-store"
chmod 600 "$dir/home/credential-store"
git_get=$(printf 'protocol=https\nhost=host%d.example.com\n\n' "$target")
python3 - "$dir/spec.json" <<PY
import json, sys
d, rounds, get = "$dir", $rounds, """$git_get\n\n"""
helper = {"argv": [d + "/bin/git-credential-keychain", "get"], "stdin": get, "expect": "password=pass$target"}
cases = {
    "helper/broker": {**helper, "env": {"KEYCHAIN_BROKER_SOCKET": "$socket", "KEYCHAIN_PATH": "$keychain"}},
    "helper/kernel": {**helper, "env": {"KEYCHAIN_PATH": "$keychain"}},
    "helper/store": {"argv": ["git", "credential-store", "--file=" + d + "/home/credential-store", "get"], "stdin": get,
                     "expect": "password=pass$target"},
}
json.dump({"rounds": rounds, "warmup": 5, "cases": cases}, open(sys.argv[1], "w"))
PY
chmod 644 "$dir/spec.json"
as_user BENCH_TRUSTED="$dir/bin/git-credential-keychain" sh -c '
    printf "bench password\n" | "$1/bin/keychain-bench" fill "$2" "$3" &&
    printf "bench password\n" | KEYCHAIN_BROKER_SOCKET=$4 "$1/bin/security" unlock-keychain "$2" &&
    python3 "$1/bin/timing.py" "$1/spec.json"' - "$dir" "$keychain" "$items" "$socket" > "$work/broker-helper.json"
no_questions "git-credential-keychain get"
