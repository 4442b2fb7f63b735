#!/usr/bin/env bash
# keychain-broker as it will run: its own throwaway system user (group tss) started with setpriv
# (only CAP_SYS_PTRACE, ambient; no_new_privs) on a socket under a temporary folder, and a
# throwaway ordinary user whose keychain it keeps. The user's side is keychain-broker-probe, a
# client as the engine will be. Checks that the user gets what the broker gives and nothing else:
# not its state, memory or keys, not by tracing it, and not from the kernel keyrings.
# Usage: Tests/broker/run.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/.build/debug}" && pwd)
# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
# shellcheck source=Tests/broker-lib.sh
. "$here/../broker-lib.sh"

broker_suite_requires setpriv keyctl useradd /usr/bin/python3

user=kcbu$$
cleanup() {
    broker_stop
    client_teardown "$user"
    broker_teardown
}
trap cleanup EXIT

broker_setup "kcb$$" kc-broker || exit 1
work=$broker_dir socket=$broker_socket
# The state (keys, lock states) goes at reboot; the pins (--pins) stay.
broker_pins=$work/pins
broker_folder "$broker_pins"
client_setup "$user" "$work/home" || exit 1
mkdir -p "$work/home"
broker_copy "$build" keychain-broker keychain-broker-probe security
printf '#!/bin/sh\ncat >/dev/null\nprintf "once\\nkeychain-pass\\n"\n' > "$work/bin/answer-once"
printf '#!/bin/sh\ncat >/dev/null\nprintf "always\\nkeychain-pass\\n"\n' > "$work/bin/answer-always"
printf '#!/bin/sh\ncat >/dev/null\nprintf "once\\nnot-the-password\\n"\n' > "$work/bin/answer-wrong"
printf '#!/bin/sh\ncat > %s/home/question\nprintf "deny\\n"\n' "$work" > "$work/bin/answer-deny"
chmod 755 "$work/bin"/*
chown "$user:" "$work/home"
chmod 700 "$work/home"
keychain=$work/home/login.keychain-db

# as_user COMMAND...: as the test user, in a keyring session of its own, without a terminal.
as_user() {
    setsid -w setpriv --reuid="$user" --regid="$user" --init-groups keyctl session - \
        env -i PATH=/usr/bin:/bin HOME="$work/home" KEYCHAIN_BROKER_SOCKET="$socket" "$@" </dev/null
}
probe() { as_user "$work/bin/keychain-broker-probe" "$@"; }

case_number=0
# shellcheck disable=SC2034 # lib.sh's check writes each case's log beside case_dir
fresh() { case_number=$((case_number + 1)); case_dir=$work/case$case_number; }
finish() { :; }

broker_start || { echo "the broker did not start"; printf '\n0 passed, 1 failed\n'; exit 1; }
probe create "$keychain" keychain-pass >/dev/null || { echo "cannot create the keychain"; printf '\n0 passed, 1 failed\n'; exit 1; }

refuses_root_and_ordinary_users() {
    local out
    out=$("$work/bin/keychain-broker" --socket "$work/root.socket" 2>&1) && return 1
    grep -q "refusing to run as root" <<< "$out"
    out=$(as_user "$work/bin/keychain-broker" --socket "$work/home/socket" 2>&1) && return 1
    grep -q "ordinary user" <<< "$out"
    [ ! -e "$work/root.socket" ] && [ ! -e "$work/home/socket" ]
}

is_hardened() {
    local status
    status=$(cat "/proc/$broker_pid/status")
    grep -qP '^NoNewPrivs:\t1$' <<< "$status"
    grep -qP '^Seccomp:\t2$' <<< "$status"
    # CAP_SYS_PTRACE (19) only, effective and bounding.
    grep -qP '^CapEff:\t0000000000080000$' <<< "$status"
    grep -qP '^CapBnd:\t0000000000080000$' <<< "$status"
    expect "$(id -u "$broker_user")" "$(grep -oP '^Uid:\t\K[0-9]+' <<< "$status")" "uid"
    expect 666 "$(stat -c %a "$socket")" "socket mode"
    expect 755 "$(stat -c %a "$work/run")" "socket folder mode"
    expect 0 "$(grep -P '^Max core file size' "/proc/$broker_pid/limits" | awk '{print $5}')" "core limit"
    # Undumpable: its /proc files are root's, not its own uid's.
    expect 0 "$(stat -c %u "/proc/$broker_pid/mem")" "owner of its mem"
}

refuses_a_socket_of_its_own_uid() {
    # The user's own "broker": it would collect the password; the client must not send it.
    as_user /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1]); s.listen(1); s.settimeout(30)
c, _ = s.accept(); c.settimeout(3)
try: data = c.recv(1 << 20)
except Exception: data = b""
open(sys.argv[2], "w").write(str(len(data)))
' "$work/home/fake" "$work/home/received" &
    local server=$! tries=200 out
    while [ ! -S "$work/home/fake" ] && [ $tries -gt 0 ]; do sleep 0.05; tries=$((tries - 1)); done
    out=$(setsid -w setpriv --reuid="$user" --regid="$user" --init-groups env -i PATH=/usr/bin:/bin KEYCHAIN_BROKER_SOCKET="$work/home/fake" \
        "$work/bin/keychain-broker-probe" unlock "$keychain" keychain-pass </dev/null) && return 1
    echo "$out"
    grep -q "own uid" <<< "$out"
    wait "$server"
    expect 0 "$(cat "$work/home/received")" "bytes the fake broker received"
}

unlocks_through_the_broker() {
    expect "open: none; settings: locked" "$(probe state "$keychain")"
    local out
    out=$(probe unlock "$keychain" wrong-pass) && return 1
    grep -q "status -25293" <<< "$out"
    expect unlocked "$(probe unlock "$keychain" keychain-pass)"
    expect "open: A C; settings: verified" "$(probe state "$keychain")"
}

names_the_caller() {
    local out
    out=$(probe whoami)
    echo "$out"
    grep -q "^caller: keychain-broker-probe ($work/bin/keychain-broker-probe) ← " <<< "$out"
    grep -q "^entry: exe:$work/bin/keychain-broker-probe$" <<< "$out"
}

reads_ask_with_the_password() {
    local out
    # Not on the item's list and nobody may be asked: refused at once.
    out=$(as_user env PROBE_NO_INTERACTION=1 "$work/bin/keychain-broker-probe" read "$keychain") && return 1
    grep -q "status -25308" <<< "$out"
    # No terminal and no answerer: nobody to ask.
    out=$(probe read "$keychain") && return 1
    grep -q "status -25308" <<< "$out"
    out=$(as_user env KEYCHAIN_ACCESS_ANSWERER="$work/bin/answer-deny" "$work/bin/keychain-broker-probe" read "$keychain") && return 1
    grep -q "status -25293" <<< "$out"
    grep -q "keychain-broker-probe ($work/bin/keychain-broker-probe) ← .* wants to read \"probe item\" (broker, account probe)" "$work/home/question"
    out=$(as_user env KEYCHAIN_ACCESS_ANSWERER="$work/bin/answer-wrong" "$work/bin/keychain-broker-probe" read "$keychain") && return 1
    grep -q "status -25293" <<< "$out"
    expect "secret: s3cret" "$(as_user env KEYCHAIN_ACCESS_ANSWERER="$work/bin/answer-once" "$work/bin/keychain-broker-probe" read "$keychain")"
    # The whole list to write: the item's own (the program that made it) and the reader.
    expect "secret: s3cret; always: exe:/usr/bin/another-program
exe:$work/bin/keychain-broker-probe" \
        "$(as_user env KEYCHAIN_ACCESS_ANSWERER="$work/bin/answer-always" "$work/bin/keychain-broker-probe" read "$keychain")"
    out=$(probe log)
    echo "$out"
    expect "not allowed
not allowed
denied
denied
allowed once
always allowed" "$(cut -d'|' -f1 <<< "$out" | sed 's/ *$//')"
}

cannot_reach_the_broker() {
    as_user cat "$work/state/state" 2>/dev/null && return 1
    as_user cat "/proc/$broker_pid/mem" 2>/dev/null && return 1
    as_user cat "/proc/$broker_pid/environ" 2>/dev/null && return 1
    as_user ls "/proc/$broker_pid/fd" 2>/dev/null && return 1
    as_user kill -0 "$broker_pid" 2>/dev/null && return 1
    local out
    out=$(as_user /usr/bin/python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, int(sys.argv[1]), None, None)  # PTRACE_ATTACH
print(r, ctypes.get_errno())
' "$broker_pid")
    expect "-1 1" "$out" "ptrace attach (EPERM)"
    # Nor the broker uid's persistent keyring, where the state key is.
    as_user keyctl get_persistent @s "$(id -u "$broker_user")" 2>/dev/null && return 1
    return 0
}

keyrings_hold_no_class_key() {
    local out
    out=$(as_user sh -c 'keyctl show @u; keyctl show "$(keyctl get_persistent @s)"')
    echo "$out"
    if grep -q keychain <<< "$out"; then return 1; fi
    # The broker's own state in its state folder, sealed: no class key in the clear, and no
    # keybag uuid either (hex of the file's field would not be in it).
    [ -s "$work/state/state" ]
    expect 600 "$(stat -c %a "$work/state/state")" "state file mode"
}

# Restarted here, not in the case: each case runs in a subshell, and the broker is this shell's child.
restart_keeps_it_unlocked() {
    expect "open: A C; settings: verified" "$(probe state "$keychain")"
    expect "secret: s3cret" "$(as_user env KEYCHAIN_ACCESS_ANSWERER="$work/bin/answer-once" "$work/bin/keychain-broker-probe" read "$keychain")"
    probe log | grep -q "always allowed"
}

# What a hostile client of the user's may send: garbage gets an error reply, a 129th connection is
# closed at once, and the broker goes on answering.
survives_hostile_clients() {
    local out
    out=$(as_user /usr/bin/python3 -c '
import socket, struct, sys
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1]); s.settimeout(10); return s
s = conn()
for message in [b"\xff", b"\x01", b"\x0b\x00", b"\x02" + b"\xff" * 64, b"\x81\x00\x00\x03\xe8"]:
    s.send(message)
    status = struct.unpack(">I", s.recv(1 << 20)[:4])[0]
    if status == 0: print("accepted", message); sys.exit(1)
held = [conn() for _ in range(140)]
closed = 0
for c in held[128:]:
    try:
        c.send(b"\x0a")
        closed += c.recv(1 << 20) == b""
    except OSError:
        closed += 1
print("closed", closed)
' "$socket")
    echo "$out"
    # 141 connections in all: the broker keeps 128, so the last 12 are closed at once.
    grep -qE '^closed (1[2-9]|[2-9][0-9])$' <<< "$out"
    probe whoami | grep -q "^caller: "
}

# systemd's way: the socket made by the service manager (here systemd-socket-activate, as root),
# handed over as descriptor 3 with LISTEN_FDS and LISTEN_PID; the broker binds nothing itself.
socket_activation() {
    command -v systemd-socket-activate >/dev/null || { echo "no systemd-socket-activate"; return 0; }
    broker_folder "$work/state2"
    ( umask 0; exec systemd-socket-activate --seqpacket -l "$work/run/activated" "${broker_setpriv[@]}" \
        "$work/bin/keychain-broker" --socket "$work/run/unused" --state "$work/state2" --pins "$work/state2" ) 2>"$work/activate.log" &
    local activator=$! tries=200 out
    while [ ! -S "$work/run/activated" ] && [ $tries -gt 0 ]; do sleep 0.05; tries=$((tries - 1)); done
    # It makes the socket 0644 whatever the umask; systemd's unit says SocketMode=0666.
    chmod 666 "$work/run/activated"
    out=$(as_user env KEYCHAIN_BROKER_SOCKET="$work/run/activated" "$work/bin/keychain-broker-probe" whoami) || true
    kill -TERM "$activator" 2>/dev/null
    wait "$activator" 2>/dev/null
    echo "$out"
    grep -q "^caller: keychain-broker-probe ($work/bin/keychain-broker-probe)" <<< "$out"
    [ ! -e "$work/run/unused" ]
}

# Issue 54: `security create-keychain` where the broker runs: the class keys are made and kept
# there (none in the user's keyrings), and the file is an ordinary keychain, which its password
# opens where no broker runs.
creates_in_the_broker() {
    local made=$work/home/made.keychain-db out
    as_user "$work/bin/security" create-keychain --no-tpm -p made-pass "$made"
    expect "open: A C; settings: verified" "$(probe state "$made")"
    out=$(as_user sh -c 'keyctl show @u; keyctl show "$(keyctl get_persistent @s)"')
    echo "$out"
    if grep -q keychain <<< "$out"; then return 1; fi
    # Making another keychain at the pinned path is refused (the file moved away first).
    as_user mv "$made" "$made.saved"
    out=$(as_user "$work/bin/security" create-keychain --no-tpm -p evil-pass "$made" 2>&1) && return 1
    echo "$out"
    grep -q "already keeps another keychain" <<< "$out"
    [ ! -e "$made" ]
    as_user mv "$made.saved" "$made"
    # Without a broker (no socket named, none at /run/keychain-broker): the kernel keyring.
    as_user env -u KEYCHAIN_BROKER_SOCKET "$work/bin/security" unlock-keychain -p made-pass "$made"
    out=$(as_user env -u KEYCHAIN_BROKER_SOCKET "$work/bin/security" unlock-keychain -p wrong "$made" 2>&1) && return 1
    echo "$out"
    # Those keys went to the kernel keyrings, which the later cases must find empty.
    as_user sh -c 'keyctl show "$(keyctl get_persistent @s)"' | grep -q "keychain:.*:C"
    as_user sh -c 'keyctl clear "$(keyctl get_persistent @s)"; keyctl clear @u' >/dev/null
}

# Issue 54: a keychain made where no broker ran, unlocked in the broker for the first time: its
# keys were in the user's kernel keyring before, and `security unlock-keychain` says so, once.
advises_rotation_at_first_unlock() {
    local old=$work/home/old.keychain-db out
    probe create "$old" old-pass >/dev/null
    out=$(as_user "$work/bin/security" unlock-keychain -p old-pass "$old" 2>&1)
    echo "$out"
    grep -q "its class keys were in this user's kernel keyring before.*--rotate-keys" <<< "$out"
    out=$(as_user "$work/bin/security" unlock-keychain -p old-pass "$old" 2>&1)
    if grep -q "rotate-keys" <<< "$out"; then return 1; fi
    grep -q "keychain=$old: first unlock in the broker" "$work/broker.log"
}

# Issue 54: `security set-keychain-password --rotate-keys` where the broker runs: new class keys
# made there and every row sealed again there; the item reads back, and the file opens with the
# new password alone where no broker runs.
rotates_in_the_broker() {
    local made=$work/home/made.keychain-db out
    as_user "$work/bin/security" unlock-keychain -p made-pass "$made"
    as_user "$work/bin/security" add-generic-password -a rot -s broker -w rotated-secret -T "$work/bin/security" "$made"
    as_user "$work/bin/security" set-keychain-password -o made-pass -p new-pass --rotate-keys "$made"
    expect "open: A C; settings: verified" "$(probe state "$made")"
    expect rotated-secret "$(as_user "$work/bin/security" find-generic-password -a rot -s broker -w "$made")"
    grep -q "keychain=$made: keys rotated" "$work/broker.log"
    out=$(as_user sh -c 'keyctl show @u; keyctl show "$(keyctl get_persistent @s)"')
    if grep -q keychain <<< "$out"; then echo "$out"; return 1; fi
    out=$(as_user env -u KEYCHAIN_BROKER_SOCKET "$work/bin/security" unlock-keychain -p made-pass "$made" 2>&1) && return 1
    as_user env -u KEYCHAIN_BROKER_SOCKET "$work/bin/security" unlock-keychain -p new-pass "$made"
    as_user sh -c 'keyctl clear "$(keyctl get_persistent @s)"; keyctl clear @u' >/dev/null
}

locks_through_the_broker() {
    expect locked "$(probe lock "$keychain")"
    expect "open: C; settings: locked" "$(probe state "$keychain")"
}

# A connection is the process that made it: another process of the user that takes the descriptor
# (pidfd_getfd, or one inherited or passed) must not speak as that process. Without Yama any
# same-uid process may take a descriptor of a process that is not undumpable (an application
# using the Security library), and the broker would hand it that application's items.
refuses_a_taken_connection() {
    local out
    out=$(as_user /usr/bin/python3 -c '
import ctypes, os, socket, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def status(s):
    s.send(b"\x0a"); reply = s.recv(1 << 20)
    return "closed" if not reply else struct.unpack(">I", reply[:4])[0]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1])
    status(s)
    os.write(w, str(s.fileno()).encode()); time.sleep(15); os._exit(0)
number = int(os.read(r, 16))
taken = libc.syscall(438, os.pidfd_open(pid), number, 0)
if taken < 0: print("pidfd_getfd failed", ctypes.get_errno()); sys.exit(1)
print("taken:", status(socket.socket(fileno=taken)))
os.kill(pid, 9)
' "$socket")
    echo "$out"
    # Refused (any status but success), or the connection closed.
    grep -qE "^taken: ([1-9][0-9]*|closed)$" <<< "$out"
    probe whoami | grep -q "^caller: "
}

# One user's connections must not shut the others out: the broker keeps at most a share of its
# connections for each uid (here nobody's, holding 140 while the test user asks).
one_user_cannot_take_every_connection() {
    setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import socket, sys, time
held = []
for _ in range(140):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1]); held.append(s)
print("held", len(held), flush=True)
time.sleep(20)
' "$socket" </dev/null >"$work/held" &
    local holder=$! tries=200 out
    while [ ! -s "$work/held" ] && [ $tries -gt 0 ]; do sleep 0.05; tries=$((tries - 1)); done
    out=$(probe whoami 2>&1) || true
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null || true
    echo "$out"
    grep -q "^caller: " <<< "$out"
}

check "the broker refuses root and ordinary users" refuses_root_and_ordinary_users
check "the broker runs with no_new_privs, seccomp, CAP_SYS_PTRACE only" is_hardened
check "the client refuses a socket served by its own uid" refuses_a_socket_of_its_own_uid
check "unlock through the broker" unlocks_through_the_broker
check "whoAmI names the caller" names_the_caller
check "an unlisted reader is asked, and allowed with the password only" reads_ask_with_the_password
check "the user cannot read, trace or signal the broker" cannot_reach_the_broker
check "the user's keyrings hold no class key" keyrings_hold_no_class_key
broker_stop
broker_start || echo "the broker did not start again"
check "a broker restart keeps the keychain unlocked" restart_keeps_it_unlocked
check "lock through the broker" locks_through_the_broker
check "socket activation: the broker serves descriptor 3" socket_activation
check "malformed requests and too many connections leave the broker serving" survives_hostile_clients
check "security create-keychain makes the class keys in the broker" creates_in_the_broker
check "security set-keychain-password --rotate-keys rotates in the broker" rotates_in_the_broker
check "the first unlock in the broker advises a rotation, once" advises_rotation_at_first_unlock

# Issue 54: a reboot empties /run (the state: keys and lock states) but not the pins folder.
pins_survive_a_fresh_state() {
    expect "open: none; settings: locked" "$(probe state "$keychain")"
    local out
    # The user's own keychain again, then another one's file put in its place.
    expect unlocked "$(probe unlock "$keychain" keychain-pass)"
    probe create "$work/home/evil.keychain-db" evil-pass >/dev/null
    as_user cp "$keychain" "$work/home/login.saved"
    as_user mv "$work/home/evil.keychain-db" "$keychain"
    out=$(probe unlock "$keychain" evil-pass) && return 1
    echo "$out"
    grep -q "status -25293 .*not the keychain the broker first unlocked there" <<< "$out"
    as_user mv "$work/home/login.saved" "$keychain"
    expect 600 "$(stat -c %a "$work/pins/pins")" "pins file mode"
    expect "$broker_user" "$(stat -c %U "$work/pins/pins")" "pins file owner"
}
broker_stop
broker_state=$work/state-after-reboot
broker_folder "$broker_state"
broker_start || echo "the broker did not start again"
check "pins outlive a fresh state: a swapped keychain is still refused" pins_survive_a_fresh_state
check "a connection taken by another process of the user is refused" refuses_a_taken_connection
check "one user cannot take every connection" one_user_cannot_take_every_connection

# Issue 55: a deputy passes the pidfd of the process it serves with an unwrap (SCM_RIGHTS), marked
# in the op byte (and with a whoAmI: the Secret Service asks who stores an item). The two come
# together, on those two only, or the request is refused (and the connection keeps serving); a
# program not on the --deputy list relaying is refused too (which may: RelayedCallerTests').
relay_marks_and_pidfd_come_together() {
    local out
    out=$(as_user /usr/bin/python3 -c '
import array, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1])
def ask(message, fd=None):
    if fd is None: s.send(message)
    else: s.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    reply = s.recv(1 << 20)
    if not reply: return "closed"
    status, n = struct.unpack(">iI", reply[:8])
    return "%d %s" % (status, reply[8:8 + n].decode())
pidfd = os.pidfd_open(os.getpid())
print("marks alone:", ask(bytes([0x48])))
print("pidfd alone:", ask(bytes([0x0a]), pidfd))
print("on lockAll:", ask(bytes([0x4d]), pidfd))
print("on whoAmI:", ask(bytes([0x4a]), pidfd))
print("after:", ask(bytes([0x0a])).split(" ")[0])
' "$socket")
    echo "$out"
    grep -qx "marks alone: -50 a relayed caller.s pidfd and the request.s relay marks must come together" <<< "$out"
    grep -qx "pidfd alone: -50 a relayed caller.s pidfd and the request.s relay marks must come together" <<< "$out"
    grep -qx "on lockAll: -26275 relay marks on a request that carries no relayed caller" <<< "$out"
    grep -qx "on whoAmI: -50 only a deputy (keychain-broker --deputy) may relay a caller" <<< "$out"
    grep -qx "after: 0" <<< "$out"
}
check "a relayed caller's pidfd and the relay marks come together, on an unwrap or a whoAmI only, from a deputy" relay_marks_and_pidfd_come_together

summary
