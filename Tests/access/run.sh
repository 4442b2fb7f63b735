#!/usr/bin/env bash
# Issue 54's attacker suite: a program of the user's own uid (a copied binary, python3, node) at
# every door of a keychain that keychain-broker keeps gets no secret unless the person, here a
# stand-in program, answers the question; and the trusted programs (security, the git and docker
# helpers under git and skopeo, a SecItem program reading its own item) get theirs without one.
# The broker runs as a throwaway system user (Tests/broker-lib.sh), the programs it trusts are
# root's copies under /run (a folder the user may write to is never trusted), the user is a
# throwaway ordinary user without a terminal.
# Usage: Tests/access/run.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/.build/debug}" && pwd)
# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
# shellcheck source=Tests/broker-lib.sh
. "$here/../broker-lib.sh"

broker_suite_requires setpriv keyctl useradd sqlite3 strace gcc git skopeo docker-registry htpasswd curl /usr/bin/python3

user=kcau$$ http_pid='' registry_pid=''
cleanup() {
    for pid in $http_pid $registry_pid; do kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
    broker_stop
    client_teardown "$user"
    broker_teardown
}
trap cleanup EXIT

broker_setup "kca$$" kc-access || exit 1
work=$broker_dir
bin=$work/bin home=$work/home socket=$broker_socket
keychain=$home/data/keychains/login.keychain-db
asked=$home/asked
client_setup "$user" "$home" || exit 1
mkdir -p "$home/data" "$home/config" "$home/docker" "$work/srv"
# The trusted programs: root's copies in a root folder.
broker_copy "$build" security git-credential-keychain docker-credential-keychain keychain-access-probe keychain-broker
# The stand-ins for the person: one that denies and keeps every question it gets, and one that
# would allow (only where a case shows that the question is what stands in the way).
printf '#!/bin/sh\ncat >> %s\nprintf "deny\\n"\n' "$asked" > "$bin/answer-deny"
printf '#!/bin/sh\ncat >> %s\nprintf "once\\nkeychain-pass\\n"\n' "$asked" > "$bin/answer-once"
# The same, slow: the person takes two seconds to answer.
printf '#!/bin/sh\ncat >> %s\nsleep 2\nprintf "once\\nkeychain-pass\\n"\n' "$asked" > "$bin/answer-once-slowly"
chmod 755 "$bin"/*
chown -R "$user:" "$home"
chmod 700 "$home"

# piped COMMAND...: as the test user, in a keyring session of its own, without a terminal, with
# the broker named and the denying stand-in to ask; standard input as given.
piped() {
    setsid -w setpriv --reuid="$user" --regid="$user" --init-groups keyctl session - \
        env -i -C "$home" PATH="$bin:/usr/bin:/bin" HOME="$home" XDG_DATA_HOME="$home/data" XDG_CONFIG_HOME="$home/config" \
        DOCKER_CONFIG="$home/docker" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 KEYCHAIN_BROKER_SOCKET="$socket" \
        KEYCHAIN_ACCESS_ANSWERER="$bin/answer-deny" "$@"
}
# as_user COMMAND...: as piped, with nothing on standard input.
as_user() { piped "$@" </dev/null; }
# nobody: as as_user, and no stand-in either: nobody can be asked.
nobody() { as_user env -u KEYCHAIN_ACCESS_ANSWERER "$@"; }
nobody_piped() { piped env -u KEYCHAIN_ACCESS_ANSWERER "$@"; }
never_asked() { [ ! -s "$asked" ] || { echo "asked:"; cat "$asked"; return 1; }; }
was_asked() { [ -s "$asked" ] || { echo "nobody was asked"; return 1; }; }

# A broker that has refused nobody yet, for each case: it stops asking a program refused three
# times within a minute, and the cases deny the same copies again and again. Its state (keys,
# pins, log) outlives the restart.
broker_programs=()
restart_broker() {
    broker_stop
    broker_start "${broker_programs[@]}"
}

case_number=0
fresh() {
    [ -z "$broker_pid" ] || restart_broker || echo "the broker did not start again"
    case_number=$((case_number + 1))
    case_dir=$work/case$case_number
    mkdir -p "$case_dir"
    rm -f "$asked"
}
finish() { :; }

fail_setup() { echo "setup: $*"; cat "$work/broker.log" 2>/dev/null; printf '\n0 passed, 1 failed\n'; exit 1; }

broker_programs=(--own-program "$bin/security" --own-program "$bin/git-credential-keychain" --own-program "$bin/docker-credential-keychain")
broker_start "${broker_programs[@]}" || fail_setup "the broker did not start"

# The git server (Tests/git's) and the registry (Tests/docker's), both on 127.0.0.1.
git init -q --bare -b main "$work/srv/repo.git"
git -C "$work/srv/repo.git" config http.receivepack true
GIT_CONFIG_NOSYSTEM=1 HOME=$work git -C "$work/srv" -c user.name=t -c user.email=t@example.com -c init.defaultBranch=main \
    init -q seed && GIT_CONFIG_NOSYSTEM=1 HOME=$work git -C "$work/srv/seed" -c user.name=t -c user.email=t@example.com \
    commit -q --allow-empty -m first && GIT_CONFIG_NOSYSTEM=1 HOME=$work git -C "$work/srv/seed" push -q "$work/srv/repo.git" main ||
    fail_setup "git seed"
chmod -R a+rwX "$work/srv/repo.git"
python3 "$here/../git/http_git_server.py" "$work/srv" gituser 'git-s3cret' "$work/port" 600 2>"$work/http.log" &
http_pid=$!
port=$(free_port)
htpasswd -Bbn reguser 'reg-s3cret' > "$work/htpasswd"
cat > "$work/registry.yml" <<YML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: 127.0.0.1:$port
auth:
  htpasswd:
    realm: test
    path: $work/htpasswd
YML
timeout 600 docker-registry serve "$work/registry.yml" > "$work/registry.log" 2>&1 &
registry_pid=$!
registry=127.0.0.1:$port
for _ in $(seq 100); do
    [ -s "$work/port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$registry/v2/")" = 401 ] && break
    sleep 0.1
done
[ -s "$work/port" ] || fail_setup "the git server did not start"
git_host=127.0.0.1:$(cat "$work/port")
git_url=http://$git_host/repo.git

# The user's keychain, made and unlocked through the broker, and one item per door.
as_user security create-keychain -p keychain-pass >/dev/null || fail_setup "create-keychain"
as_user security unlock-keychain -p keychain-pass >/dev/null || fail_setup "unlock-keychain"
as_user git config --global credential.helper "$bin/git-credential-keychain" || fail_setup "git config"
printf 'protocol=http\nhost=%s\nusername=gituser\npassword=git-s3cret\n\n' "$git_host" | piped git credential approve ||
    fail_setup "git credential approve"
printf '{"credHelpers": {"%s": "keychain"}}\n' "$registry" > "$home/docker/config.json"
chown "$user:" "$home/docker/config.json"
printf '{"ServerURL":"%s","Username":"reguser","Secret":"reg-s3cret"}' "$registry" | piped docker-credential-keychain store ||
    fail_setup "docker-credential-keychain store"
[ "$(as_user keychain-access-probe "$keychain" add probe-service probe-account probe-s3cret)" = "status 0" ] || fail_setup "SecItemAdd"
as_user security add-generic-password -s tool-service -a tool-account -w tool-s3cret >/dev/null || fail_setup "add-generic-password"
# The attacker's copies, in the user's home: the same bytes, not the same program.
cp "$bin/security" "$bin/keychain-access-probe" "$bin/git-credential-keychain" "$bin/docker-credential-keychain" "$home/"
chown "$user:" "$home"/security "$home"/keychain-access-probe "$home"/*-credential-keychain

secrets=(git-s3cret reg-s3cret probe-s3cret tool-s3cret)
# leaks TEXT: whether any stored secret is in TEXT.
leaks() {
    local secret
    for secret in "${secrets[@]}"; do
        if grep -qF "$secret" <<< "$1"; then echo "leaked $secret"; return 0; fi
    done
    return 1
}

# --- the trusted paths: their secrets, and no question ---------------------------------------------

trusted_security() {
    expect tool-s3cret "$(as_user security find-generic-password -s tool-service -w)"
    never_asked
}

trusted_secitem() {
    expect "status 0 probe-s3cret" "$(as_user keychain-access-probe "$keychain" read probe-service probe-account)"
    never_asked
}

trusted_git() {
    as_user git clone -q "$git_url" "$home/clone"
    as_user git -C "$home/clone" -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m second
    as_user git -C "$home/clone" push -q origin main
    expect second "$(git -C "$work/srv/repo.git" log -1 --format=%s main)"
    never_asked
}

trusted_skopeo() {
    # skopeo reads the login through the helper (credHelpers), and the registry takes it: a
    # missing repository is "unknown", not "unauthorized".
    expect reguser "$(as_user skopeo login --get-login --authfile "$home/docker/config.json" "$registry")"
    local out
    out=$(as_user skopeo list-tags --tls-verify=false --authfile "$home/docker/config.json" "docker://$registry/none/such" 2>&1) && return 1
    echo "$out"
    grep -q "404" <<< "$out"
    if grep -qi "unauthorized\|authentication required" <<< "$out"; then return 1; fi
    never_asked
}

# --- the untrusted programs: asked, denied, nothing ---------------------------------------------

copied_security() {
    local out status
    for kind in "find-generic-password -s tool-service" "find-internet-password -s 127.0.0.1 -a gituser" "find-internet-password -s 127.0.0.1 -a reguser"; do
        # shellcheck disable=SC2086 # the command and its options, as words
        status=0
        out=$(as_user "$home/security" $kind -w 2>&1) || status=$?
        echo "$kind: $status $out"
        expect 51 "$status" "exit of a denied read"
        if leaks "$out"; then return 1; fi
    done
    was_asked
    grep -q "security ($home/security" "$asked"
}

# The trusted security reading an item that trusts only a helper under git is asked too.
security_reads_helper_items() {
    local out
    local account
    for account in gituser reguser; do
        out=$(as_user security find-internet-password -s 127.0.0.1 -a "$account" -w 2>&1) && return 1
        echo "$out"
        if leaks "$out"; then return 1; fi
        expect 51 "$(status_of as_user security find-internet-password -s 127.0.0.1 -a "$account" -w)"
    done
    was_asked
}

copied_secitem() {
    expect "status -25293" "$(as_user "$home/keychain-access-probe" "$keychain" read probe-service probe-account)"
    was_asked
    # The trusted probe reading an item it did not make: asked as well.
    rm -f "$asked"
    expect "status -25293" "$(as_user keychain-access-probe "$keychain" read tool-service tool-account)"
    was_asked
}

helpers_run_directly() {
    local out
    # Not under git: the git helper (trusted, and the user's copy) is asked; the answer is no.
    for helper in git-credential-keychain "$home/git-credential-keychain"; do
        out=$(printf 'protocol=http\nhost=%s\n\n' "$git_host" | piped "$helper" get 2>&1) || true
        echo "$helper: $out"
        if leaks "$out" || grep -q '^password=' <<< "$out"; then return 1; fi
    done
    for helper in docker-credential-keychain "$home/docker-credential-keychain"; do
        out=$(printf '%s' "$registry" | piped "$helper" get 2>&1) && return 1
        echo "$helper: $out"
        if leaks "$out"; then return 1; fi
    done
    was_asked
}

interpreters() {
    local out
    out=$(as_user python3 -c '
import subprocess, sys
r = subprocess.run([sys.argv[1], "get"], input=("protocol=http\nhost=%s\n\n" % sys.argv[2]).encode(), capture_output=True)
print(r.returncode, r.stdout.decode(), r.stderr.decode())
' "$bin/git-credential-keychain" "$git_host" 2>&1)
    echo "python3: $out"
    if leaks "$out"; then return 1; fi
    command -v node >/dev/null || { echo "no node: python3 only"; was_asked; return 0; }
    out=$(as_user node -e '
const r = require("child_process").spawnSync(process.argv[1], ["get"], { input: process.argv[2] });
console.log(r.status, String(r.stdout), String(r.stderr));
' "$bin/docker-credential-keychain" "$registry" 2>&1)
    echo "node: $out"
    if leaks "$out"; then return 1; fi
    was_asked
}

nobody_to_ask() {
    expect 36 "$(status_of nobody "$home/security" find-generic-password -s tool-service -w)" "exit, nobody to ask"
    expect "status -25308" "$(nobody "$home/keychain-access-probe" "$keychain" read probe-service probe-account)"
    local out
    out=$(printf 'protocol=http\nhost=%s\n\n' "$git_host" | nobody_piped git-credential-keychain get 2>&1) || true
    if leaks "$out"; then return 1; fi
}

keychain_file() {
    local secret dump
    for secret in "${secrets[@]}"; do
        if as_user grep -qaF "$secret" "$keychain"; then echo "$secret in the file"; return 1; fi
    done
    dump=$(as_user sqlite3 "$keychain" .dump)
    [ -n "$dump" ]
    if leaks "$dump"; then return 1; fi
}

keyrings() {
    local out
    out=$(as_user sh -c 'keyctl show @u; keyctl show @s; keyctl show @us; keyctl show "$(keyctl get_persistent @s)"' 2>&1)
    echo "$out"
    if grep -qE 'keychain:.*:(A|C)' <<< "$out" || grep -q keychain <<< "$out"; then return 1; fi
}

broker_memory() {
    local out
    as_user cat "/proc/$broker_pid/mem" 2>/dev/null && return 1
    as_user python3 -c '
import sys
f = open("/proc/%s/mem" % sys.argv[1], "rb")
' "$broker_pid" 2>/dev/null && return 1
    out=$(as_user python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
print(libc.ptrace(16, int(sys.argv[1]), None, None), ctypes.get_errno())  # PTRACE_ATTACH
' "$broker_pid")
    expect "-1 1" "$out" "ptrace attach (EPERM)"
    out=$(as_user strace -p "$broker_pid" -o /dev/null 2>&1) && return 1
    echo "$out"
    grep -q "Operation not permitted" <<< "$out"
    if command -v gdb >/dev/null; then
        out=$(as_user gdb -batch -p "$broker_pid" -ex 'info registers' 2>&1) || true
        echo "$out"
        if grep -q '^rip\|^pc ' <<< "$out"; then return 1; fi
    fi
    return 0
}

ld_preload() {
    # The library leaves a mark where it runs.
    printf '#include <stdio.h>\n#include <stdlib.h>\n__attribute__((constructor)) static void evil(void) {\n'\
'const char *m = getenv("EVIL_MARK"); FILE *f = m ? fopen(m, "a") : NULL; if (f) { fputs("ran\\n", f); fclose(f); }\n}\n' \
        > "$home/evil.c"
    chown "$user:" "$home/evil.c"
    as_user gcc -shared -fPIC -o "$home/evil.so" "$home/evil.c"
    local out
    # The SecItem program (dynamically linked) reading its own item, with the user's library in it.
    expect "status -25293" "$(as_user env LD_PRELOAD="$home/evil.so" EVIL_MARK="$home/mark-probe" keychain-access-probe "$keychain" read probe-service probe-account)"
    [ -s "$home/mark-probe" ]
    was_asked
    rm -f "$asked"
    # git runs the helper with the library in git: the helper's parent cannot vouch for it.
    out=$(as_user env LD_PRELOAD="$home/evil.so" EVIL_MARK="$home/mark-git" git clone -q "$git_url" "$home/preloaded" 2>&1) && return 1
    echo "git: $out"
    [ -s "$home/mark-git" ]
    if leaks "$out"; then return 1; fi
    was_asked
    rm -f "$asked"
    # security and the helpers are linked statically: the loader never runs, nor the library.
    out=$(as_user env LD_PRELOAD="$home/evil.so" EVIL_MARK="$home/mark-security" security find-generic-password -s tool-service -w 2>&1)
    echo "security: $out"
    [ ! -e "$home/mark-security" ]
}

traced() {
    local out
    out=$(as_user strace -f -o /dev/null security find-generic-password -s tool-service -w 2>&1) && return 1
    echo "security: $out"
    if leaks "$out"; then return 1; fi
    was_asked
    rm -f "$asked"
    out=$(printf 'protocol=http\nhost=%s\n\n' "$git_host" | piped strace -f -o /dev/null git credential fill 2>&1) && return 1
    echo "git: $out"
    if leaks "$out"; then return 1; fi
    was_asked
    rm -f "$asked"
    # PTRACE_TRACEME: the child asks to be traced by python, then runs the trusted security.
    out=$(as_user python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.dup2(w, 1)
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
    os.execv(sys.argv[1], [sys.argv[1], "find-generic-password", "-s", "tool-service", "-w"])
os.close(w)
while True:
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status): break
    libc.ptrace(7, pid, None, None)  # PTRACE_CONT
print(os.read(r, 4096).decode(), os.WEXITSTATUS(status))
' "$bin/security" 2>&1)
    echo "traceme: $out"
    if leaks "$out"; then return 1; fi
    grep -q "51$" <<< "$out"
    was_asked
}

# A trusted application that keeps running: identified once when it connected, it is then traced
# by a program of the user's (no Yama here: any same-uid process may attach to a dumpable one),
# which could make it read anything it is trusted for. Its next read is asked.
traced_after_connect() {
    local fifo=$home/go out tries=400
    mkfifo "$fifo"
    chown "$user:" "$fifo"
    as_user sh -c 'exec keychain-access-probe "$1" read-twice probe-service probe-account < "$2"' - "$keychain" "$fifo" \
        > "$case_dir/out" 2>&1 &
    local app=$!
    exec 3> "$fifo"
    while ! grep -q "^status" "$case_dir/out" && [ $tries -gt 0 ]; do sleep 0.05; tries=$((tries - 1)); done
    cat "$case_dir/out"
    expect "status 0 probe-s3cret" "$(grep "^status" "$case_dir/out")" "first read, untraced"
    # The tracer attaches (PTRACE_SEIZE: the application goes on running), lets it read again and
    # stays attached until it exits.
    out=$(as_user python3 -c '
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
if libc.ptrace(0x4206, pid, None, None) != 0: sys.exit("seize: errno %d" % ctypes.get_errno())  # PTRACE_SEIZE
with open(sys.argv[2], "w") as go: go.write("go\n")
while True:
    _, status = os.waitpid(pid, 0x40000000)  # __WALL
    if os.WIFEXITED(status) or os.WIFSIGNALED(status): break
    sig = os.WSTOPSIG(status)
    libc.ptrace(7, pid, None, 0 if sig == signal.SIGTRAP else sig)  # PTRACE_CONT
print("attached until exit")
' "$(sed -n 's/^pid //p' "$case_dir/out")" "$fifo" 2>&1)
    echo "$out"
    exec 3>&-
    wait "$app" || true
    cat "$case_dir/out"
    grep -q "attached until exit" <<< "$out"
    expect "status 0 probe-s3cret
status -25293" "$(grep "^status" "$case_dir/out")" "the reads before and after the tracer came"
    was_asked
}

fake_broker() {
    # The user's own "broker" named by the environment, a unit's Environment= or environment.d:
    # the client refuses it before it sends anything (so no password, no item).
    mkdir -p "$home/config/environment.d" "$home/config/systemd/user"
    printf 'KEYCHAIN_BROKER_SOCKET=%s/fake\nKEYCHAIN_BROKER=off\n' "$home" > "$home/config/environment.d/50-keychain.conf"
    printf '[Service]\nEnvironment=KEYCHAIN_BROKER_SOCKET=%s/fake\nExecStart=/usr/bin/python3 %s/fake.py\n' "$home" "$home" \
        > "$home/config/systemd/user/keychain-broker.service"
    cat > "$home/fake.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1]); s.listen(8); s.settimeout(60)
received = 0
with open(sys.argv[2], "w") as log:
    while True:
        try: c, _ = s.accept()
        except Exception: break
        c.settimeout(2)
        try: data = c.recv(1 << 20)
        except Exception: data = b""
        log.write("%d\n" % len(data)); log.flush()
        c.close()
PY
    chown -R "$user:" "$home/config" "$home/fake.py"
    as_user python3 "$home/fake.py" "$home/fake" "$home/received" &
    local server=$! tries=200 out status
    while [ ! -S "$home/fake" ] && [ $tries -gt 0 ]; do sleep 0.05; tries=$((tries - 1)); done
    # What the environment.d file gives the user's session.
    for command in "security unlock-keychain -p keychain-pass" "security find-generic-password -s tool-service -w" \
        "$home/security find-generic-password -s tool-service -w"; do
        # shellcheck disable=SC2086 # the command and its options, as words
        status=0
        out=$(as_user sh -c 'set -a; . "$1"; shift; exec "$@"' - "$home/config/environment.d/50-keychain.conf" $command 2>&1) || status=$?
        echo "$command: $status $out"
        expect 53 "$status" "exit against the fake broker"
        if leaks "$out"; then return 1; fi
    done
    out=$(printf 'protocol=http\nhost=%s\n\n' "$git_host" |
        piped sh -c 'set -a; . "$1"; shift; exec "$@"' - "$home/config/environment.d/50-keychain.conf" git credential fill 2>&1) && { echo "git: $out"; return 1; }
    echo "git: $out"
    if leaks "$out"; then return 1; fi
    expect "status -25291" "$(as_user env KEYCHAIN_BROKER_SOCKET="$home/fake" keychain-access-probe "$keychain" read probe-service probe-account)" \
        "SecItem against the fake broker (errSecNotAvailable)"
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null || true
    # It took connections and was sent nothing.
    echo "received: $(tr '\n' ' ' < "$home/received")"
    [ -s "$home/received" ]
    expect 0 "$(sort -u "$home/received")" "bytes the fake broker received"
    never_asked
}

broker_off_changes_nothing() {
    local out
    out=$(as_user env KEYCHAIN_BROKER=off "$home/security" find-generic-password -s tool-service -w 2>&1) && return 1
    echo "$out"
    if leaks "$out"; then return 1; fi
    expect 51 "$(status_of as_user env KEYCHAIN_BROKER=off "$home/security" find-generic-password -s tool-service -w)"
    was_asked
    expect 36 "$(status_of nobody env KEYCHAIN_BROKER=off "$home/security" find-generic-password -s tool-service -w)"
}

# Issue 55: three processes of the same program asking for the same item at once put one
# question in front of the person, and share its answer. They are one program run's: children of
# one parent (review 55: an answer stays in the asker's process tree), and the program is one that
# nobody drives with arguments (the trusted SecItem program, reading an item it did not make:
# `security` and interpreters never share, see below).
one_question_for_concurrent_reads() {
    local out
    out=$(as_user env KEYCHAIN_ACCESS_ANSWERER="$bin/answer-once-slowly" sh -c '
        for i in 1 2 3; do keychain-access-probe "$1" read tool-service tool-account & done
        wait' - "$keychain" 2> "$case_dir/reads.err")
    echo "$out"
    expect 3 "$(grep -c '^status 0 tool-s3cret$' <<< "$out")" "reads that got the secret"
    expect 1 "$(grep -c 'wants to read' "$asked")" "questions asked"
    expect 2 "$(shared_in_log)" "shared answers in the log"
}

# shared_in_log: how many reads the access log shows given another process's answer.
shared_in_log() { as_user security access-log | grep -c 'the answer to the same question asked by another process'; }

# Review 55: the same program started elsewhere by the user (not the asker's child nor its
# sibling) while the question is open waits for it to end, and is then asked itself: the person
# answered for the other run. One question at a time, none shared.
shared_answer_stays_in_its_process_tree() {
    local before
    before=$(shared_in_log)
    as_user env KEYCHAIN_ACCESS_ANSWERER="$bin/answer-once-slowly" keychain-access-probe "$keychain" read tool-service tool-account \
        > "$case_dir/person" 2> "$case_dir/person.err" &
    for _ in $(seq 100); do [ -s "$asked" ] && break; sleep 0.05; done
    expect "status -25293" "$(as_user keychain-access-probe "$keychain" read tool-service tool-account 2> /dev/null)" "the other run's read"
    wait
    expect "status 0 tool-s3cret" "$(cat "$case_dir/person")" "the person's own read"
    expect 2 "$(grep -c 'wants to read' "$asked")" "questions, one for each run"
    expect "$before" "$(shared_in_log)" "shared answers in the log"
}

# Review 55 (an attack): the person is asked whether the user's own `security` may read git's
# password, and allows it once. A process of the user that starts the same program for the same
# item while the question is open (it sees the answerer start, and reads the asker's command
# line) waits, and takes that answer: it is never asked (its own answerer would deny), the
# person never agreed to it, and it prints the password.
shared_answer_goes_to_an_unasked_process() {
    local out before
    before=$(shared_in_log)
    as_user env KEYCHAIN_ACCESS_ANSWERER="$bin/answer-once-slowly" security find-internet-password -s 127.0.0.1 -a gituser -w \
        > "$case_dir/person" 2> "$case_dir/person.err" &
    for _ in $(seq 100); do [ -s "$asked" ] && break; sleep 0.05; done
    out=$(as_user security find-internet-password -s 127.0.0.1 -a gituser -w 2> /dev/null) || :
    wait
    expect git-s3cret "$(cat "$case_dir/person")" "the person's own read"
    echo "the other process got: $out"
    # After the fix the other process waits for the person's question to end and is then asked
    # its own (`security` shares no answer), which its answerer denies: two questions, none shared.
    expect 2 "$(grep -c 'wants to read' "$asked")" "questions, the person's and the other process's own"
    expect "$before" "$(shared_in_log)" "shared answers in the log"
    if leaks "$out"; then return 1; fi
}

# Review 55 (an attack): the broker counts sessions so that no process of the user can keep the
# keychain unlocked after the last logout; but whether that end locks is the keychain's setting,
# and the broker MACs any settings it is sent for an unlocked keychain (settingsMAC, no password,
# no question). A copy of security in the home turns lock at logout off; it must be refused.
settings_need_more_than_an_unlocked_keychain() {
    local status
    status=$(status_of as_user "$home/security" set-keychain-settings "$keychain")
    as_user security show-keychain-info "$keychain" 2>&1 || :
    [ "$status" != 0 ] || { echo "lock at logout turned off by a copy in the home, no password, nobody asked"; return 1; }
}

# Review 55's fix: a change that locks more needs no password; one that locks less does, given on
# standard input (as for a locked keychain); without it, errSecInteractionNotAllowed (36).
settings_that_lock_less_need_the_password() {
    expect 0 "$(status_of as_user security set-keychain-settings -l -t 600)" "a timeout where there was none"
    expect 0 "$(status_of as_user security set-keychain-settings -l -t 300)" "a shorter one"
    expect 36 "$(status_of as_user security set-keychain-settings -l -t 1200)" "a longer one, no password"
    expect 36 "$(status_of as_user security set-keychain-settings -l)" "none, no password"
    expect 51 "$(printf 'wrong\n' | status_of piped security set-keychain-settings -l)" "none, a wrong password"
    as_user security show-keychain-info 2>&1 | tee "$case_dir/info"
    grep -q "lock-on-sleep use-lock-interval timeout=300s" "$case_dir/info"
    expect 0 "$(printf 'keychain-pass\n' | status_of piped security set-keychain-settings -l)" "none, with the password"
    as_user security show-keychain-info 2>&1 | tee "$case_dir/info"
    grep -q "lock-on-sleep no-timeout" "$case_dir/info"
}

# The settings' MAC has no counter: a pair the file once held (here no lock at logout, set with
# the password) written back after stronger settings must not count. The broker keeps the last
# pair it made (the keychain's pin) and takes any other as damaged: the safe defaults, which lock
# at logout.
settings_written_back_are_not_taken() {
    local old
    expect 0 "$(printf 'keychain-pass\n' | status_of piped security set-keychain-settings)" "no lock at logout, with the password"
    as_user security show-keychain-info 2>&1 | tee "$case_dir/weak"
    if grep -q "lock-on-sleep" "$case_dir/weak"; then echo "the weaker settings did not take"; return 1; fi
    old=$(as_user sqlite3 "$keychain" "SELECT name || '=' || hex(value) FROM keychain WHERE name IN ('settings', 'settings.mac')")
    expect 0 "$(status_of as_user security set-keychain-settings -l -t 300)" "stronger ones, no password"
    while IFS='=' read -r name value; do
        as_user sqlite3 "$keychain" "UPDATE keychain SET value = X'$value' WHERE name = '$name'"
    done <<< "$old"
    as_user security show-keychain-info 2>&1 | tee "$case_dir/info"
    # Set again for the cases after, with the password (the damaged ones read as the defaults).
    expect 0 "$(printf 'keychain-pass\n' | status_of piped security set-keychain-settings -l)" "settings made again"
    grep -q "lock-on-sleep" "$case_dir/info"
}

# The stand-in that would allow: the question alone stood between the copy and the secret.
allowed_once_by_the_person() {
    expect tool-s3cret "$(as_user env KEYCHAIN_ACCESS_ANSWERER="$bin/answer-once" "$home/security" find-generic-password -s tool-service -w)"
    was_asked
}

access_log() {
    local out json
    out=$(as_user security access-log)
    echo "$out"
    grep -q "^[0-9-]*T[0-9:]*Z denied: security ($home/security.*genp \"tool-service\" (tool-service, account tool-account)" <<< "$out"
    grep -q "^[0-9-]*T[0-9:]*Z not allowed: security ($home/security" <<< "$out"
    grep -q "denied: keychain-access-probe ($home/keychain-access-probe" <<< "$out"
    grep -q "denied: git-credential-keychain ($bin/git-credential-keychain" <<< "$out"
    grep -q "denied: docker-credential-keychain ($bin/docker-credential-keychain" <<< "$out"
    # Allow once given to a program that cannot be named is logged as such.
    grep -q "unidentified: security ($home/security" <<< "$out"
    grep -q "trusted: security ($bin/security)" <<< "$out"
    grep -q "trusted: git-credential-keychain ($bin/git-credential-keychain) ← .*git" <<< "$out"
    json=$(as_user security access-log --json)
    python3 -c '
import json, sys
entries = [json.loads(line) for line in sys.stdin]
assert entries and all({"time", "program", "decision", "label", "account"} <= e.keys() for e in entries), entries
assert any(e["decision"] == "denied" and e["account"] == "tool-account" for e in entries)
' <<< "$json"
    expect "" "$(as_user security access-log --since 4000000000)" "lines after 2096"
    expect "$(wc -l <<< "$out")" "$(as_user security access-log --since 1970-01-02 | wc -l)" "lines since 1970-01-02"
    expect "" "$(as_user security access-log --since 2096-01-01T00:00:00)" "lines after 2096-01-01T00:00:00"
    expect 2 "$(status_of as_user security access-log --since 2026-13-01)" "exit for a month 13"
    # Without a broker: none named and none at the system's socket.
    if [ -e /run/keychain-broker/socket ]; then echo "this machine has a broker: not checked without one"; return 0; fi
    out=$(as_user env -u KEYCHAIN_BROKER_SOCKET security access-log 2>&1) && return 1
    echo "$out"
    expect 53 "$(status_of as_user env -u KEYCHAIN_BROKER_SOCKET security access-log)"
    grep -q "no keychain broker" <<< "$out"
}

# The keychain file swapped whole: a process of the user puts, at a path the broker pinned, a
# keychain whose password it knows, so that trusted programs would store new secrets where it
# reads them. Refused until someone forgets the pin with the old keychain's password.
swapped_keychain() {
    as_user security create-keychain -p second-pass second >/dev/null
    as_user security unlock-keychain -p second-pass second >/dev/null
    as_user security create-keychain -p evil-pass evil >/dev/null
    local keychains=$home/data/keychains status
    as_user sh -c "mv '$keychains/evil.keychain-db' '$keychains/second.keychain-db'"
    status=$(status_of as_user security unlock-keychain -p evil-pass second)
    expect 51 "$status" "unlocking the swapped-in keychain"
    status=$(status_of as_user security forget-keychain -p wrong-pass second)
    expect 51 "$status" "forgetting the pin without the old password"
    status=$(status_of as_user security forget-keychain -p evil-pass second)
    expect 51 "$status" "forgetting the pin with the new keychain's password"
    as_user security forget-keychain -p second-pass second
    as_user security unlock-keychain -p evil-pass second >/dev/null
    as_user security access-log | grep -q "not the keychain first unlocked at this path"
}

# The review's planted list: the attacker's copy of security adds an item that trusts any program
# where the person's security will store a password (-U: update if there); what arrives is not
# the attacker's to read.
planted_list() {
    as_user "$home/security" add-generic-password -A -s mail-service -a mail-account -w planted >/dev/null
    as_user security add-generic-password -U -s mail-service -a mail-account -w mail-s3cret >/dev/null
    local out status
    out=$(as_user "$home/security" find-generic-password -w -s mail-service -a mail-account 2>&1) && status=0 || status=$?
    expect 51 "$status" "the attacker's copy reading what the person stored"
    ! grep -q mail-s3cret <<< "$out"
    expect mail-s3cret "$(as_user security find-generic-password -w -s mail-service -a mail-account)"
}

check "trusted: security -w reads its own item, nothing asked" trusted_security
check "trusted: a SecItem program reads its own item, nothing asked" trusted_secitem
check "trusted: git clone and push through the helper, nothing asked" trusted_git
check "trusted: skopeo through the docker helper against the registry, nothing asked" trusted_skopeo
check "a copy of security in the home: asked, denied (51), nothing" copied_security
check "security -w of a helper's item: asked, denied" security_reads_helper_items
check "a copy of the SecItem program: asked, denied (-25293)" copied_secitem
check "the helpers run directly with a crafted request: asked, nothing" helpers_run_directly
check "python3 and node driving the helpers: asked, nothing" interpreters
check "nobody to ask: errSecInteractionNotAllowed (36, -25308)" nobody_to_ask
check "the keychain file holds no secret (grep, sqlite3)" keychain_file
check "no class key in any keyring the user reaches" keyrings
check "the broker's memory: /proc/PID/mem, ptrace, strace, gdb refused" broker_memory
check "LD_PRELOAD into the SecItem program and into git: asked, nothing (security: static, inert)" ld_preload
check "trusted programs under a tracer (strace -f, PTRACE_TRACEME): asked, nothing" traced
check "a trusted application traced after it connected: asked, nothing" traced_after_connect
check "a fake broker of the user's (environment.d, unit, KEYCHAIN_BROKER_SOCKET): refused (53), sent nothing" fake_broker
check "KEYCHAIN_BROKER=off changes nothing" broker_off_changes_nothing
check "the person's answer is what stands in the way: Allow once gives the copy the secret" allowed_once_by_the_person
check "three reads at once by the same program and item: one question, its answer shared" one_question_for_concurrent_reads
check "the same program run elsewhere while the question is open is asked itself, not given the answer (review 55)" shared_answer_stays_in_its_process_tree
check "a process of the same program that waits on another's question is not given its answer (review 55)" shared_answer_goes_to_an_unasked_process
check "a copy in the home cannot turn lock at logout off without the password (review 55)" settings_need_more_than_an_unlocked_keychain
check "settings that lock more need no password, those that lock less need it (review 55)" settings_that_lock_less_need_the_password
check "settings written back with the MAC they once had: not taken, the safe defaults apply" settings_written_back_are_not_taken
check "security access-log names each attempt (program, item, decision)" access_log
check "a keychain swapped in at a pinned path: refused until forget-keychain with the old password" swapped_keychain
check "a list planted before the password arrives (-A, then the person's -U): the copy gets nothing" planted_list

summary
