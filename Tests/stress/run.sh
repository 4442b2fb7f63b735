#!/usr/bin/env bash
# Hardening: crashes, concurrency, bad input and secrets. `make test` runs the fast counts;
# `make stress` (--long) runs the issue's full counts: 200 kills, 4 x 1,000 concurrent
# operations, 3,000 fuzzed requests per helper and import-secrets sources, 50,000 random SecItem
# dictionaries, 20,000 damaged keyring files and 1,000 wrong passwords through
# `security unlock-keychain` with the real KDF.
set -uo pipefail
bin=$(realpath "${1:-.build/debug}")
long=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
seed=${STRESS_SEED:-$(date +%s)}
if [ "$long" = --long ]; then kills=200 ops=1000 fuzz=3000; else kills=25 ops=150 fuzz=150; fi
echo "seed $seed (STRESS_SEED=$seed reproduces this run)"

fresh() {
    case_dir=$(mktemp -d /tmp/keychain-stress-XXXXXX)
    chmod 755 "$case_dir"
}
finish() { rm -rf "$case_dir"; }

crash() { python3 "$here/crash.py" "$bin/keychain-stress-writer" "$kills" "$seed"; }
concurrency() { python3 "$here/concurrency.py" "$bin" "$ops" "$seed"; }
fuzz() { python3 "$here/fuzz.py" "$bin" "$fuzz" "$seed"; }
fuzz_import() { /usr/bin/python3 "$here/fuzz_import.py" "$bin" "$fuzz" "$seed"; }

# A tool that holds keys must be undumpable from its first instruction: no core file, no
# ptrace by the user's other processes. For a process of an unprivileged user the kernel then
# makes the files in /proc/PID root's, which can be seen from outside; `cat`, dumpable, is the
# control that shows the check can tell.
undumpable() {
    local tool pid owner fifo=$case_dir/stdin
    mkdir "$case_dir/home" && chown nobody "$case_dir/home"
    mkfifo "$fifo" && chmod 666 "$fifo"
    cp /bin/cat "$case_dir/"
    for tool in "cat" "security create-keychain held" "git-credential-keychain get" "docker-credential-keychain get"; do
        [ "$tool" = cat ] || { cp "$bin/${tool%% *}" "$case_dir/" && chmod 755 "$case_dir/${tool%% *}"; }
        # Each blocks reading its standard input, which nobody writes to until it is checked.
        HOME=$case_dir/home XDG_DATA_HOME=$case_dir/home/data setpriv --reuid=nobody --regid=nogroup --clear-groups \
            "$case_dir/"$tool < "$fifo" > /dev/null 2>&1 &
        pid=$!
        exec 9> "$fifo"
        # Once it waits on its standard input it is the tool, past its first instructions: not
        # the shell or setpriv before the exec, which a fixed sleep may catch on a loaded machine.
        wait_reading_stdin "$pid"
        owner=$(stat -c %U "/proc/$pid/status")
        exec 9>&-
        # Killed, or gone already at the end of its input: its status is not the point.
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        if [ "$tool" = cat ]; then
            expect nobody "$owner" "owner of /proc/PID/status of cat (dumpable) run as nobody"
        else
            expect root "$owner" "owner of /proc/PID/status of ${tool%% *} run as nobody"
        fi
    done
}

wrong_passwords() {
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config
    printf 'the right one\n' | "$bin/security" create-keychain guarded
    "$bin/security" default-keychain -s guarded
    printf 'guarded secret\n' | "$bin/security" add-generic-password -a a -s guarded-item -w
    "$bin/security" lock-keychain guarded
    local start end n status
    start=$(date +%s.%N)
    for n in $(seq "${WRONG_PASSWORDS:-1000}"); do
        status=$(printf 'wrong %d\n' "$n" | "$bin/security" unlock-keychain guarded >/dev/null 2>&1; echo $?)
        [ "$status" = 51 ] || { echo "try $n: status $status, expected 51"; return 1; }
    done
    end=$(date +%s.%N)
    # Still locked: the WhenUnlocked item is refused with errSecInteractionNotAllowed (36).
    expect 36 "$(status_of "$bin/security" find-generic-password -s guarded-item -w)" "status of a lookup after 1,000 wrong passwords"
    printf 'the right one\n' | "$bin/security" unlock-keychain guarded
    expect "guarded secret" "$("$bin/security" find-generic-password -s guarded-item -w)"
    awk -v s="$start" -v e="$end" 'BEGIN { printf "1,000 wrong passwords: %.1f ms per try (KDF + process)\n", (e - s) }'
    "$bin/security" delete-keychain guarded
}

check "SIGKILL during writes and password changes ($kills kills): nothing acknowledged is lost" crash
check "git, docker and security at once (4 x $ops operations): no lost update, no duplicate" concurrency
check "fuzzed git and docker requests ($fuzz each): no crash, no hang, documented statuses" fuzz
check "fuzzed import-secrets sources ($fuzz: keyring files, git and docker files): no crash, no hang, documented statuses" fuzz_import
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    check "security and both helpers are undumpable from the start" undumpable
else
    skip "the undumpable check runs the tools as nobody, which needs root"
fi
if [ "$long" = --long ]; then
    check "random SecItem dictionaries (50,000): only documented codes" \
        env KEYCHAIN_FUZZ_ITERATIONS=50000 swift test --skip-build --disable-swift-testing --filter FuzzTests
    check "damaged keyring files (20,000) read in process: only errSecDecode or errSecAuthFailed" \
        env KEYCHAIN_FUZZ_ITERATIONS=20000 swift test --skip-build --disable-swift-testing --filter GnomeKeyringTests.testFuzzedFilesNeverCrash
    check "1,000 wrong passwords through security unlock-keychain: all refused (51)" wrong_passwords
fi
summary
