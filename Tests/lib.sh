# shellcheck shell=bash
# The harness the shell suites share. A suite defines `fresh` (set up a case: its own HOME, XDG
# folders, keychain, and `case_dir`) and `finish` (tear it down), then calls `check NAME FUNCTION`
# for each case and `summary` at the end; `skip REASON` stands for a case (or a group of cases)
# that cannot run here, so that the summary counts it instead of hiding it.
pass=0 fail=0 skipped=0

# check NAME COMMAND...: the case passes when COMMAND succeeds under `set -e`.
check() {
    local name=$1 started took outcome; shift
    started=$(date +%s%N)
    fresh
    # Not `if ( set -e; ... )`: bash ignores -e for everything run as an if condition, so a case
    # would then fail only when its last command did.
    # shellcheck disable=SC2154 # case_dir is set by the suite's `fresh`
    ( set -e; "$@" ) > "$case_dir.log" 2>&1
    outcome=$?
    # The case's time with its set-up, so that a slow case shows where a suite's time goes.
    took=$(( ($(date +%s%N) - started) / 100000000 ))
    took="$((took / 10)).$((took % 10)) s"
    if [ $outcome -eq 0 ]; then
        pass=$((pass + 1)); echo "ok   $name ($took)"
    else
        fail=$((fail + 1)); echo "FAIL $name ($took)"; sed 's/^/     /' "$case_dir.log"
    fi
    finish
    rm -f "$case_dir.log"
}

# expect EXPECTED ACTUAL [WHAT]
expect() {
    if [ "$1" != "$2" ]; then echo "expected ${3:-}: [$1]"; echo "got: [$2]"; return 1; fi
}

# status_of COMMAND...: the command's exit status, its output dropped.
status_of() { "$@" >/dev/null 2>&1; echo $?; }

# wait_reading_stdin PID [SECONDS]: waits until process PID sits in read(2) on its standard
# input (its /proc/PID/syscall: the read system call with file descriptor 0), up to SECONDS (20),
# so that a case looks at a process once it waits for input, not after a fixed sleep that a
# loaded machine outlasts. Fails if the process is gone or never gets there.
wait_reading_stdin() {
    local pid=$1 tries=$(( ${2:-20} * 20 )) read_nr nr fd _
    case "$(uname -m)" in
        x86_64) read_nr=0 ;;
        aarch64 | riscv64 | loongarch64) read_nr=63 ;;
        *) echo "wait_reading_stdin: the read system call's number on $(uname -m) is not known"; return 1 ;;
    esac
    while [ "$tries" -gt 0 ]; do
        # Reading /proc/PID/syscall needs the right to ptrace PID: root, as these cases run.
        read -r nr fd _ < "/proc/$pid/syscall" 2>/dev/null || { [ -d "/proc/$pid" ] || { echo "process $pid is gone"; return 1; }; }
        [ "${nr:-}" = "$read_nr" ] && [ "${fd:-}" = 0x0 ] && return 0
        sleep 0.05
        tries=$((tries - 1))
    done
    echo "process $pid never waited on its standard input"
    return 1
}

# skip REASON: one more skipped, and why.
skip() {
    skipped=$((skipped + 1)); echo "skipped: $*"
}

# The closing line Tests/run-all.sh (and CI) reads: `N passed, N failed, N skipped`.
summary() {
    echo
    echo "$pass passed, $fail failed, $skipped skipped"
    [ "$fail" -eq 0 ]
}

# copy_tree REPO DEST: the checkout's files as they are now (tracked and new ones, not those git
# ignores), so nothing built comes along: what a fresh clone with the working tree's edits holds.
copy_tree() {
    local repo=$1 dest=$2 file
    mkdir -p "$dest"
    if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$repo" ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' file; do
            [ -e "$repo/$file" ] && printf '%s\0' "$file"
        done | tar -C "$repo" --null -T - -cf - | tar -C "$dest" -xf -
    else
        tar -C "$repo" --exclude=./.build --exclude='./.build-*' --exclude=./.swiftpm -cf - . | tar -C "$dest" -xf -
    fi
}

# For a suite that runs each case in a D-Bus session of its own, by starting itself again inside it
# (`bash run.sh --inner BIN FUNCTION ARGS...`): sets bin (the built binaries, first on PATH), inner
# (set inside the bus) and py (Debian's python3, which has its D-Bus packages); git reads no
# system configuration. The caller drops `--inner BIN` itself: `[ -z "$inner" ] || shift 2`.
# shellcheck disable=SC2034 # bin, inner and py are the sourcing suite's
bus_suite_start() {
    if [ "${1:-}" = --inner ]; then
        bin=$2 inner=1
    else
        bin=$(realpath "${1:-.build/debug}") inner=
    fi
    export PATH="$bin:$PATH" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
    py=/usr/bin/python3
}

# A desktop user's case for those suites (Tests/desktop, Tests/kde): case_dir from mktemp PREFIX,
# its own HOME, XDG folders and XDG_RUNTIME_DIR; the "machine's" folders in case_dir/system:
# units (our unit from the build, $SYSTEMD_UNIT_PATH) and services; case_dir/session.conf for
# user_case_bus, whose service folders are the user's ~/.local/share/dbus-1/services (where
# enable writes) and then case_dir/system/services; prompts answered from case_dir/answers by
# Tests/secret-service/pinentry.sh. Needs bin (bus_suite_start).
user_case_start() {
    local tests
    tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    case_dir=$(mktemp -d "$1")
    export case_dir
    export HOME=$case_dir/home XDG_DATA_HOME=$case_dir/home/data XDG_CONFIG_HOME=$case_dir/home/config \
        XDG_STATE_HOME=$case_dir/home/state XDG_RUNTIME_DIR=$case_dir/run
    mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
    unset KEYCHAIN_PATH DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL XDG_CURRENT_DESKTOP
    user_case_system
    export KEYCHAIN_PINENTRY=$tests/secret-service/pinentry.sh PINENTRY_ANSWERS=$case_dir/answers PINENTRY_LOG=$case_dir/pinentry.log
    : > "$PINENTRY_ANSWERS"
}

# The machine's folders of a case in $case_dir/system: our systemd user unit from the build, a
# D-Bus service folder after the user's, and the session bus's configuration naming both.
user_case_system() {
    local tests
    tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    mkdir -p "$case_dir/system/units" "$case_dir/system/services"
    sed "s|@BINDIR@|$bin|" "$tests/../Sources/keychain-secret-service/dbus/keychain-secret-service.service.in" \
        > "$case_dir/system/units/keychain-secret-service.service"
    export SYSTEMD_UNIT_PATH=$case_dir/system/units
    sed "s|<servicedir>@SERVICES@</servicedir>|<servicedir>$XDG_DATA_HOME/dbus-1/services</servicedir><servicedir>$case_dir/system/services</servicedir>|" \
        "$tests/secret-service/session.conf" > "$case_dir/session.conf"
}

# The case's keychains deleted and its folder removed.
user_case_finish() {
    local keychain
    for keychain in "$XDG_DATA_HOME"/keychains/*.keychain-db; do
        [ -e "$keychain" ] && security delete-keychain "$keychain" >/dev/null 2>&1
    done
    rm -rf "$case_dir"
}

# user_case_bus SUITE FUNCTION ARGS...: FUNCTION of the suite's script SUITE inside the case's own
# session bus, bounded in time; the bus daemon's routine lines left out.
user_case_bus() {
    local suite=$1; shift
    timeout 150 dbus-run-session --config-file="$case_dir/session.conf" -- bash "$suite" --inner "$bin" "$@" \
        2> >(grep -v -e 'Failed to set fd limit' -e 'Reloaded configuration' -e 'Activating service name' -e 'Successfully activated' >&2)
}

# A port P with P and P+1 free on 127.0.0.1: a swtpm and its control channel (Tests/tpm, Tests/tpm-pam).
free_port() {
    python3 - <<'PY'
import random, socket
for _ in range(200):
    p = random.randrange(20000, 60000, 2)
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
    except OSError:
        continue
    print(p); break
PY
}

# private_polkit WORK: inside a mount namespace of the caller's own (unshare -m), a private system
# bus (a tmpfs over /run/dbus) and Debian's polkitd reading the actions in WORK/actions; their
# pids in WORK/dbus.pid and WORK/polkitd.pid, polkitd's log in WORK/polkitd.log. Returns once
# polkit has its name on the bus (up to 5 s). The machine's own bus and polkit are not touched.
private_polkit() {
    local work=$1
    mount --make-rprivate /
    mount -t tmpfs -o mode=755 tmpfs /run/dbus
    mount --bind "$work/actions" /usr/share/polkit-1/actions
    dbus-daemon --system --fork --print-pid > "$work/dbus.pid"
    /usr/lib/polkit-1/polkitd --no-debug > "$work/polkitd.log" 2>&1 &
    echo $! > "$work/polkitd.pid"
    for _ in $(seq 50); do
        grep -q true <<< "$(dbus-send --system --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.NameHasOwner \
            string:org.freedesktop.PolicyKit1 2>/dev/null)" && return 0
        sleep 0.1
    done
    return 1
}
