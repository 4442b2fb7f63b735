#!/usr/bin/env bash
# pam_keychain's `passwordless` option against Debian's swtpm: a login that carried no password
# (fingerprint, smart card, autologin) unlocks a keychain whose user enrolled a passwordless copy
# (`security tpm-enroll --passwordless`). pamtester as root drives throwaway /etc/pam.d services
# whose auth stack is pam_permit, standing in for the fingerprint module; swtpm listens on
# 127.0.0.1 (the module's `tpm_tcti=`). Every case makes and removes its own user, service files
# and kernel keys; the machine's own PAM stack is never touched. This machine's passwordless key
# (/var/lib/keychain/passwordless) is made by the first session, as on a real machine, and removed
# at the end if this suite made it.
#
#   Tests/tpm-pam/run.sh [BIN]      BIN: the folder of security, keychain-tpm-helper, libpam_keychain.so
set -uo pipefail
bin=$(realpath "${1:-.build/debug}")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

if [ "$(id -u)" != 0 ]; then
    skip "the passwordless PAM suite makes users and /etc/pam.d files, and needs root"
    summary
    exit 0
fi
for tool in swtpm pamtester tpm2_getcap tpm2_pcrextend tpm2_pcrreset keyctl python3; do
    command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install swtpm tpm2-tools pamtester keyutils python3)"; exit 1; }
done

machine_dir=/var/lib/keychain/passwordless
made_machine_key=''
[ -e "$machine_dir" ] || made_machine_key=yes
[ -e /var/lib/keychain ] || made_machine_key=parent

work=$(mktemp -d /tmp/keychain-tpm-pam-XXXXXX)
pids=() devlog='' devlog_pid=''
stop_all() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    [ -z "$devlog_pid" ] || kill "$devlog_pid" 2>/dev/null
    [ -z "$devlog" ] || rm -f "$devlog"
    wait 2>/dev/null
    rm -rf "$work"
    case $made_machine_key in
        yes) rm -rf "$machine_dir" ;;
        parent) rm -rf /var/lib/keychain ;;
    esac
}
trap stop_all EXIT

# The users run these: copies in a folder anyone can read (the checkout may be private).
stage=$work/bin
mkdir -p "$stage"
cp "$bin/security" "$bin/keychain-tpm-helper" "$bin/libpam_keychain.so" "$stage/"
chmod 755 "$work" "$stage" "$stage"/*
bin=$stage
module=$bin/libpam_keychain.so
cd /

if [ ! -e /dev/log ]; then
    devlog=$(mktemp /tmp/tpm-pam-devlog-XXXXXX)
    python3 "$here/../pam/devlog.py" "$devlog" 1800 &
    devlog_pid=$!
    for _ in $(seq 50); do [ -S /dev/log ] && break; sleep 0.1; done
fi

port=$(free_port)
mkdir -p "$work/tpm"
timeout 1800 swtpm socket --tpm2 --server type=tcp,port="$port",bindaddr=127.0.0.1 \
    --ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 --tpmstate dir="$work/tpm" \
    --flags not-need-init,startup-clear > "$work/tpm.log" 2>&1 &
pids+=($!)
tcti="swtpm:host=127.0.0.1,port=$port"
for _ in $(seq 1 100); do
    TPM2TOOLS_TCTI=$tcti tpm2_getcap properties-fixed >/dev/null 2>&1 && break
    sleep 0.1
done
tpm() { TPM2TOOLS_TCTI=$tcti "$@"; }

# The administrator's escrow key: the secret half root's alone, the public half in a folder of
# root's (pam_keychain's tpm_escrow= names it; on a real machine /etc/keychain/recovery-escrow.pub).
"$bin/security" tpm-escrow --new-key "$work/escrow.key" > "$work/escrow.pub" 2>/dev/null
escrow="tpm_escrow=$work/escrow.pub"

# A service: pam_permit for auth (the fingerprint module's place) and the module in session.
write_service() {
    local name=$1 options=$2 tcti_option=${3:-$tcti}
    cat > "/etc/pam.d/$name" <<PAM
auth     required  pam_permit.so
account  required  pam_permit.so
session  optional  $module debug $options tpm_tcti=$tcti_option tpm_helper=$bin/keychain-tpm-helper
PAM
}

fresh() {
    case_dir=$(mktemp -d "$work/case-XXXXXX")
    chmod 755 "$case_dir"
    user=kcp$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
    service=keychain-pwless-$user
    plain=keychain-plain-$user
    useradd -m -s /bin/sh "$user"
    uid=$(id -u "$user") gid=$(id -g "$user") home=$(getent passwd "$user" | cut -d: -f6)
    write_service "$service" passwordless
    write_service "$plain" ""
    tpm tpm2_pcrreset 16 >/dev/null 2>&1
    [ -n "$devlog" ] && : > "$devlog"
    printf 'pw\n' | as_user security create-keychain >/dev/null
}

finish() {
    as_user keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1
    userdel -r "$user" >/dev/null 2>&1
    rm -rf "$home" "/etc/pam.d/$service" "/etc/pam.d/$plain" "$case_dir"
    # The owner authorization an attack case set, should it have stopped before taking it back.
    tpm tpm2_changeauth -c o -p attacker >/dev/null 2>&1 || true
}

as_user() {
    setpriv --reuid="$uid" --regid="$gid" --init-groups env -i HOME="$home" PATH="$bin:/usr/bin:/bin" \
        KEYCHAIN_TPM_TCTI="$tcti" "$@"
}

# A login through SERVICE that carries no password: pam_permit accepts, the session opens.
login() { pamtester "${1:-$service}" "$user" authenticate open_session; }
state() { as_user security status 2>/dev/null | awk -v c="$1:" '$1 == c { print $2 }'; }
# Both class keys out of the kernel, as after a reboot.
reboot_keys() { as_user keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1; }
logged() {
    [ -z "$devlog" ] && return 0
    for _ in $(seq 50); do grep -q "$1" "$devlog" && return 0; sleep 0.1; done
    echo "not logged: $1"; cat "$devlog"
    return 1
}
enrol() {
    printf 'pw\n' | as_user security tpm-enroll --passwordless "$@" > "$case_dir/enrol.out" 2> "$case_dir/enrol.err" || {
        echo "tpm-enroll --passwordless $*:"; cat "$case_dir/enrol.err"; return 1
    }
}

# --- cases ---------------------------------------------------------------------------------

passwordless_login_unlocks() {
    printf 'p1\n' | as_user security add-generic-password -a u -s when-unlocked -w
    printf 'p2\n' | as_user security add-generic-password -a u -s device --accessibility whenUnlockedThisDeviceOnly -w
    if [ ! -e "$machine_dir/machine.pub" ]; then
        # Before any session through a service with the option, the machine has no key: said, nothing changed.
        out=$(printf 'pw\n' | as_user security tpm-enroll --passwordless 2>&1) && return 1
        grep -q 'no key for passwordless unlocks yet' <<< "$out"
        as_user security status | grep -q '^TPM: *present, not used'
        login >/dev/null
    fi
    enrol
    grep -q '^recovery key: ' "$case_dir/enrol.out"
    grep -q 'now unlock' "$case_dir/enrol.err"
    as_user security status | grep -q '^passwordless: *on: .*PCR 7'
    as_user security tpm-status | grep -q '^passwordless: *on'
    reboot_keys
    expect locked "$(state WhenUnlocked)"
    expect locked "$(state AfterFirstUnlock)"
    login >/dev/null
    expect unlocked "$(state WhenUnlocked)"
    expect unlocked "$(state AfterFirstUnlock)"
    expect p1 "$(as_user security find-generic-password -s when-unlocked -w)"
    expect p2 "$(as_user security find-generic-password -s device -w)" "a ThisDeviceOnly item"
    logged "open_session (passwordless): unlocked the login keychain of $user with its passwordless copy"
    # A sealed keychain enrolled later, on its own.
    printf 'pw\n' | as_user security tpm-enroll --passwordless --pcrs 7,16 2>/dev/null
    as_user security status | grep -q '^passwordless: *on: .*PCR 7,16'
    as_user security lock-keychain
    login >/dev/null
    expect unlocked "$(state WhenUnlocked)"
}

without_enrolment_nothing_unlocks() {
    printf 'pw\n' | as_user security tpm-enroll >/dev/null 2>&1
    as_user security status | grep -q '^passwordless: *off'
    as_user security lock-keychain
    login >/dev/null
    expect locked "$(state WhenUnlocked)"
    logged 'no passwordless unlock'
    # A keychain never sealed to the TPM cannot be enrolled without being sealed: --passwordless does both.
}

boot_state_change_refuses_and_the_login_goes_on() {
    enrol --pcrs 16
    as_user security lock-keychain
    tpm tpm2_pcrextend 16:sha256=0000000000000000000000000000000000000000000000000000000000000001 >/dev/null
    out=$(login 2>&1)
    grep -q 'successfully opened a session' <<< "$out"
    expect locked "$(state WhenUnlocked)" "changed PCR 16"
    # No boot event log here: the journal says it cannot tell a changed boot chain from a PCR
    # extended after boot.
    logged 'PCR 16 differs from the sealed value: the boot chain changed or a PCR was extended since boot .* seals it to this boot state again'
    # The boot state back (a resettable PCR here; on a real machine: booting the way it was sealed).
    tpm tpm2_pcrreset 16 >/dev/null
    login >/dev/null
    expect unlocked "$(state WhenUnlocked)"
    # The password still opens it, whatever the PCRs.
    tpm tpm2_pcrextend 16:sha256=0000000000000000000000000000000000000000000000000000000000000002 >/dev/null
    as_user security lock-keychain
    printf 'pw\n' | as_user security unlock-keychain
    expect unlocked "$(state WhenUnlocked)"
    # With a boot event log (root reads it for the worker: tpm_event_log= here, the kernel's on a
    # real machine) that measured nothing into PCR 16: the journal says it was extended after boot.
    python3 "$here/../tpm/event-log.py" "$case_dir/event-log" "7:$(printf '%064d' 7)"
    write_service "$service" "passwordless tpm_event_log=$case_dir/event-log"
    as_user security lock-keychain
    [ -z "$devlog" ] || : > "$devlog"
    login >/dev/null
    expect locked "$(state WhenUnlocked)" "PCR 16 extended"
    logged 'PCR 16 was extended after boot: its value is not the one this boot.s event log replays to'
    grep -q 'boot chain changed' "$devlog" && return 1
    printf 'pw\n' | as_user security unlock-keychain
    expect unlocked "$(state WhenUnlocked)"
}

the_machine_key_is_roots() {
    login >/dev/null
    expect "root 755" "$(stat -c '%U %a' "$machine_dir")"
    expect "root 600" "$(stat -c '%U %a' "$machine_dir/machine.key")"
    expect "root 644" "$(stat -c '%U %a' "$machine_dir/machine.pub")"
    expect 1 "$(status_of as_user cat "$machine_dir/machine.key")" "the user reads the secret key"
    as_user cat "$machine_dir/machine.pub" >/dev/null
    # A copy of the user's sealed box is of no use to the user: only root's key opens it.
    enrol
    expect 32 "$(stat -c %s "$machine_dir/machine.key")"
}

a_service_without_the_option_does_not_unlock() {
    enrol
    as_user security lock-keychain
    login "$plain" >/dev/null
    expect locked "$(state WhenUnlocked)"
    login >/dev/null
    expect unlocked "$(state WhenUnlocked)"
}

su_and_sudo_are_refused() {
    enrol
    as_user security lock-keychain
    other=kco$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
    useradd -M -s /bin/sh "$other"
    other_uid=$(id -u "$other")
    # A set-user-ID program started by another user (su, sudo): real uid theirs, effective root.
    out=$(setpriv --ruid="$other_uid" --euid=0 pamtester "$service" "$user" authenticate open_session 2>&1)
    grep -q 'successfully opened a session' <<< "$out"
    expect locked "$(state WhenUnlocked)" "run by $other through a set-user-ID program"
    logged 'passwordless unlock refused: not run by root'
    # PAM_RUSER naming someone else (sudo and su set it to the invoking user).
    pamtester -I ruser="$other" "$service" "$user" authenticate open_session >/dev/null
    expect locked "$(state WhenUnlocked)" "requested by $other"
    logged "requested by $other"
    userdel "$other"
    # The same service, run by root for the user (gdm, login): unlocks.
    login >/dev/null
    expect unlocked "$(state WhenUnlocked)"
}

unenrol_removes_it() {
    enrol
    printf 'pw\n' | as_user security tpm-unenroll --passwordless 2>"$case_dir/err"
    grep -q 'no passwordless unlock any more' "$case_dir/err"
    as_user security status | grep -q '^passwordless: *off'
    expect 0 "$(sqlite3 "$home/.local/share/keychains/login.keychain-db" "SELECT count(*) FROM keychain WHERE name = 'passwordless'")"
    as_user security lock-keychain
    login >/dev/null
    expect locked "$(state WhenUnlocked)"
    # Removing the whole binding takes it too; a rotation makes it stale and removes it.
    enrol
    printf 'pw\n' | as_user security tpm-unenroll 2>/dev/null
    expect 0 "$(sqlite3 "$home/.local/share/keychains/login.keychain-db" "SELECT count(*) FROM keychain WHERE name = 'passwordless'")"
    enrol
    as_user security set-keychain-password --rotate-keys -o pw -p pw >/dev/null 2>&1
    as_user security status | grep -q '^passwordless: *off'
}

a_tpm_that_answers_wrongly_never_blocks_a_login() {
    enrol
    liar=$(free_port)
    timeout 600 python3 "$here/../tpm/lying-tpm.py" "$liar" "$port" 20261125 600 1.0 &
    liar_pid=$!
    sleep 0.5
    write_service "$service" passwordless "swtpm:host=127.0.0.1,port=$liar"
    for n in 1 2 3 4 5 6; do
        as_user security lock-keychain
        start=$(date +%s)
        out=$(timeout 60 pamtester "$service" "$user" authenticate open_session 2>&1)
        grep -q 'successfully opened a session' <<< "$out" || { echo "attempt $n: $out"; kill $liar_pid; return 1; }
        [ $(($(date +%s) - start)) -le 25 ] || { echo "attempt $n took too long"; kill $liar_pid; return 1; }
        expect locked "$(state WhenUnlocked)" "attempt $n: every answer damaged"
        tpm tpm2_flushcontext -t >/dev/null 2>&1; tpm tpm2_flushcontext -l >/dev/null 2>&1
    done
    kill $liar_pid
    logged 'open_session (passwordless): failed: '
    # Nothing listens: the login goes on at once.
    write_service "$service" passwordless "swtpm:host=127.0.0.1,port=$(free_port)"
    login >/dev/null
    expect locked "$(state WhenUnlocked)"
    write_service "$service" passwordless
    login >/dev/null
    expect unlocked "$(state WhenUnlocked)"
}

a_password_login_goes_through_the_tpm_and_its_counter() {
    # The password stack's own service: pam_unix checks the password, the module unlocks with it
    # through the TPM named by tpm_tcti= (the worker's environment is cleared).
    echo "$user:pw" | chpasswd
    cat > "/etc/pam.d/$plain" <<PAM
auth     required  pam_unix.so
auth     optional  $module debug
account  required  pam_unix.so
session  optional  $module debug tpm_tcti=$tcti tpm_helper=$bin/keychain-tpm-helper
PAM
    printf 'pw\n' | as_user security tpm-enroll >/dev/null 2>&1
    kc=$home/.local/share/keychains/login.keychain-db
    sqlite3 "$kc" ".backup '$case_dir/old'"
    as_user security lock-keychain
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    expect unlocked "$(state WhenUnlocked)"
    # An older copy of the file put back: the login goes on, the keychain stays locked, the log says why.
    as_user security lock-keychain
    install -o "$user" -g "$gid" -m 600 "$case_dir/old" "$kc"
    rm -f "$kc-wal" "$kc-shm"
    out=$(printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session 2>&1)
    grep -q 'successfully opened a session' <<< "$out"
    expect locked "$(state WhenUnlocked)" "an older copy"
    logged 'open_session: failed: this keychain file is an older copy'
}

# The machine's key made by several first sessions at once, by applications with umask 077 (a
# pam_umask before this module): one key pair, whole, its public half readable by the users.
the_machine_key_made_at_once_is_one_pair() {
    # Only a key this suite made is removed and made again: never a real machine's.
    [ -n "$made_machine_key" ] || { echo "skipped: this machine had a passwordless key before the suite"; return 0; }
    for attempt in 1 2 3 4 5; do
        rm -rf "$machine_dir"
        [ "$made_machine_key" = parent ] && rm -rf /var/lib/keychain
        logins=()
        for n in 1 2 3 4 5 6 7 8; do (umask 077; pamtester "$service" "$user" open_session >/dev/null 2>&1) & logins+=($!); done
        wait "${logins[@]}"
        expect "root 755" "$(stat -c '%U %a' "$machine_dir")" "attempt $attempt"
        expect "root 644" "$(stat -c '%U %a' "$machine_dir/machine.pub")" "attempt $attempt"
        enrol
        as_user security lock-keychain
        login >/dev/null
        expect unlocked "$(state WhenUnlocked)" "attempt $attempt"
    done
}

# Another user who got hold of this user's keychain (a copy left readable) makes it their own
# login keychain, or puts its passwordless record into theirs: root opens the box, sees it names
# someone else, and hands nothing over.
another_users_box_opens_nothing() {
    login >/dev/null
    enrol
    printf 'secret\n' | as_user security add-generic-password -a u -s victim -w
    other=kcx$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
    useradd -m -s /bin/sh "$other"
    other_home=$(getent passwd "$other" | cut -d: -f6)
    as_other() {
        setpriv --reuid="$(id -u "$other")" --regid="$(id -g "$other")" --init-groups env -i HOME="$other_home" \
            PATH="$bin:/usr/bin:/bin" KEYCHAIN_TPM_TCTI="$tcti" "$@"
    }
    kc=.local/share/keychains/login.keychain-db
    # The whole file, as the other user's login keychain.
    mkdir -p "$other_home/.local/share/keychains"
    cp "$home/$kc" "$other_home/$kc"
    chown -R "$other:" "$other_home/.local"
    chmod 700 "$other_home/.local/share/keychains"; chmod 600 "$other_home/$kc"
    pamtester "$service" "$other" authenticate open_session >/dev/null
    logged 'holds another user'
    expect 36 "$(status_of as_other security find-generic-password -s victim -w)" "the copy stays locked"
    # The record alone, in a keychain of the other user's own, enrolled too.
    rm -f "$other_home/$kc"*
    printf 'pw\n' | as_other security create-keychain >/dev/null
    printf 'pw\n' | as_other security tpm-enroll --passwordless >/dev/null 2>&1
    row=$(sqlite3 "$home/$kc" "SELECT hex(value) FROM keychain WHERE name = 'passwordless'")
    sqlite3 "$other_home/$kc" "UPDATE keychain SET value = x'$row' WHERE name = 'passwordless'"
    as_other security lock-keychain
    pamtester "$service" "$other" authenticate open_session >/dev/null
    expect locked "$(as_other security status 2>/dev/null | awk '$1 == "WhenUnlocked:" { print $2 }')" "the other user's keychain"
    as_other keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1
    userdel -r "$other" >/dev/null 2>&1
}

# keychain-tpm-helper, started by the worker as the user, is dumpable for the few milliseconds
# before it makes itself undumpable: the user's own program can open its descriptors through /proc
# then. It must find no reply pipe of the worker's there (root reads the reply after the worker
# ends, and a writer held open would keep the login waiting for ever, past the time limit). The
# watcher runs as root here, standing in for a user's program that won that race.
a_reply_pipe_held_open_never_blocks_a_login() {
    login >/dev/null
    enrol
    as_user security lock-keychain
    python3 - 60 > "$case_dir/holder.log" 2>&1 <<'PY' &
import os, sys, time, stat
end = time.time() + float(sys.argv[1]); held = []
# Helpers already running (an earlier case's, waiting out a TPM that did not answer) are not this
# login's: only those that start from here on are looked at.
def helpers():
    for pid in os.listdir('/proc'):
        try:
            if pid.isdigit() and open('/proc/%s/comm' % pid).read().startswith('keychain-tpm'): yield pid
        except OSError:
            pass
seen = set(helpers())
while time.time() < end:
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or pid in seen: continue
        try:
            with open('/proc/%s/comm' % pid) as f:
                if not f.read().startswith('keychain-tpm'): continue
            seen.add(pid)
            for fd in os.listdir('/proc/%s/fd' % pid):
                if int(fd) > 2 and os.readlink('/proc/%s/fd/%s' % (pid, fd)).startswith('pipe:'):
                    held.append(os.open('/proc/%s/fd/%s' % (pid, fd), os.O_WRONLY | os.O_NONBLOCK))
                    print('held a pipe of', pid, 'at', fd, flush=True)
        except OSError:
            pass
    time.sleep(0.001)
PY
    holder=$!
    sleep 0.5
    start=$(date +%s)
    out=$(timeout 60 pamtester "$service" "$user" authenticate open_session 2>&1) || true
    took=$(($(date +%s) - start))
    kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null || true
    cat "$case_dir/holder.log"
    grep -q 'successfully opened a session' <<< "$out" || { echo "the login did not finish ($took s): $out"; return 1; }
    [ "$took" -le 25 ] || { echo "the login took $took s"; return 1; }
    expect "" "$(cat "$case_dir/holder.log")" "the helper holds a pipe"
    expect unlocked "$(state WhenUnlocked)"
}

# The first login with a password, auto_create and OPTIONS in session, through TCTI (default the
# suite's TPM): the login keychain is made from the login password.
first_login_service() {
    echo "$user:pw" | chpasswd
    cat > "/etc/pam.d/$plain" <<PAM
auth     required  pam_unix.so
auth     optional  $module debug
account  required  pam_unix.so
session  optional  $module debug auto_create $1 tpm_tcti=${2:-$tcti} tpm_helper=$bin/keychain-tpm-helper
PAM
    as_user security delete-keychain "$home/.local/share/keychains/login.keychain-db"
    [ ! -e "$home/.local/share/keychains/login.keychain-db" ]
}

first_login_with_tpm_enroll_seals() {
    first_login_service "tpm_enroll $escrow"
    out=$(printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session 2>&1)
    grep -q 'successfully opened a session' <<< "$out"
    expect unlocked "$(state WhenUnlocked)"
    as_user security tpm-status | grep -q '^sealed: *yes, to this TPM'
    as_user security tpm-status | grep -q '^recovery key: *never shown: sealed at a first login.*in the escrow below'
    as_user security tpm-status | grep -q "^escrow: *the recovery key, sealed to the administrator's key"
    logged 'open_session: the new login keychain is sealed to the TPM; its recovery key, which a login cannot show, is escrowed'
    # Sealed for real: a wrong password is the TPM's to count, the login password opens it.
    as_user security lock-keychain
    before=$(tpm tpm2_getcap properties-variable | sed -n 's/^TPM2_PT_LOCKOUT_COUNTER: *//p')
    expect 51 "$(printf 'wrong\n' | as_user sh -c 'security unlock-keychain >/dev/null 2>&1; echo $?')"
    after=$(tpm tpm2_getcap properties-variable | sed -n 's/^TPM2_PT_LOCKOUT_COUNTER: *//p')
    [ "$((after))" = "$((before + 1))" ] || { echo "the TPM counted $before then $after"; return 1; }
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    expect unlocked "$(state WhenUnlocked)"
    # Unenrolled and enrolled again, it has a recovery key that was shown: the mark goes.
    printf 'pw\n' | as_user security tpm-unenroll 2>/dev/null
    printf 'pw\n' | as_user security tpm-enroll 2>/dev/null | grep -q '^recovery key: '
    as_user security tpm-status | grep -q 'never shown' && return 1
    tpm tpm2_dictionarylockout -c >/dev/null 2>&1
    true
}

first_login_without_a_tpm_is_unsealed() {
    first_login_service tpm_enroll "swtpm:host=127.0.0.1,port=$(free_port)"
    start=$(date +%s)
    out=$(printf 'pw\n' | timeout 60 pamtester "$plain" "$user" authenticate open_session 2>&1)
    grep -q 'successfully opened a session' <<< "$out"
    [ $(($(date +%s) - start)) -le 25 ] || { echo "the login took too long"; return 1; }
    expect unlocked "$(state WhenUnlocked)"
    as_user env KEYCHAIN_TPM_TCTI=none security tpm-status | grep -q '^sealed: *no'
    logged 'open_session: the new login keychain could not be sealed to the TPM'
    as_user security lock-keychain
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    expect unlocked "$(state WhenUnlocked)"
}

first_login_follows_the_default() {
    # The user's choice, kept in their home: honoured without the option; no_tpm_enroll wins over it.
    as_user security tpm-enroll --default on >/dev/null
    first_login_service "$escrow"
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    as_user security tpm-status | grep -q '^sealed: *yes, to this TPM'
    first_login_service "no_tpm_enroll $escrow"
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    expect unlocked "$(state WhenUnlocked)"
    as_user security tpm-status | grep -q '^sealed: *no'
    # Off (and no choice at all, the machine's default unset): not sealed.
    as_user security tpm-enroll --default off >/dev/null
    first_login_service ""
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    as_user security tpm-status | grep -q '^sealed: *no'
}

# A first login seals nothing it could not give back: with no escrow key, or one that someone
# else could have replaced, the keychain is made with the password alone and the log says why.
first_login_without_an_escrow_key_is_unsealed() {
    kc=$home/.local/share/keychains/login.keychain-db
    first_login_service tpm_enroll
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    expect unlocked "$(state WhenUnlocked)"
    as_user security tpm-status | grep -q '^sealed: *no'
    [ ! -e "$kc.recovery-escrow" ]
    logged 'could not be sealed to the TPM (no recovery escrow key is configured'
    # A key file the user could have written: refused, not used.
    mkdir "$case_dir/keys"
    cp "$work/escrow.pub" "$case_dir/keys/escrow.pub"
    chown "$user" "$case_dir/keys/escrow.pub"
    first_login_service "tpm_enroll tpm_escrow=$case_dir/keys/escrow.pub"
    [ -z "$devlog" ] || : > "$devlog"
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    as_user security tpm-status | grep -q '^sealed: *no'
    logged "the recovery escrow key cannot be used: .* must be root's"
}

# Another user of the TPM takes a sealed login keychain away: with the lockout authorization
# empty (Linux's default), `tpm2_clear` changes the owner's seed and the sealed secret is gone;
# with the owner authorization empty, `tpm2_changeauth -c o` stops the storage key from being
# made. A keychain sealed at a first login never showed its recovery key: the administrator
# opens its escrow, and the recovery key gives the keychain back, its items whole.
first_login_keychain_survives() {
    local attack=$1
    kc=$home/.local/share/keychains/login.keychain-db
    first_login_service "tpm_enroll $escrow"
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    as_user security tpm-status | grep -q '^sealed: *yes, to this TPM'
    printf 'kept\n' | as_user security add-generic-password -a u -s mail -w
    as_user security tpm-status | grep -q '^hierarchy: *lockout authorization empty: .*tpm2_changeauth -c l'
    as_user security lock-keychain
    case $attack in
        clear) tpm tpm2_clear >/dev/null ;;
        owner) tpm tpm2_changeauth -c o attacker >/dev/null ;;
    esac
    # The login password opens it no more, at a login or by hand.
    printf 'pw\n' | pamtester "$plain" "$user" authenticate open_session >/dev/null
    expect locked "$(state WhenUnlocked)" "after the attack ($attack)"
    out=$(printf 'pw\n' | as_user security unlock-keychain 2>&1) && return 1
    if [ "$attack" = owner ]; then
        grep -q "its owner authorization is set" <<< "$out" || { echo "$out"; return 1; }
        as_user security tpm-status | grep -q '^hierarchy: *owner authorization set'
        as_user security tpm-status | grep -q '^sealed: *yes, but this TPM refuses to make its storage key'
    fi
    # The administrator opens the escrow with the secret key; the user recovers with its key.
    key=$("$bin/security" tpm-escrow --key "$work/escrow.key" "$kc.recovery-escrow" 2>/dev/null | sed -n 's/^recovery key: //p') || true
    [ -n "$key" ] || { echo "the escrow gave no recovery key"; return 1; }
    local seal_again=()
    [ "$attack" = owner ] && seal_again=(--no-tpm)
    printf '%s\nnew\n' "$key" | as_user security tpm-recover "${seal_again[@]}" >/dev/null 2>&1 || { echo "tpm-recover failed"; return 1; }
    expect kept "$(as_user security find-generic-password -s mail -w)"
    as_user security lock-keychain
    printf 'new\n' | as_user security unlock-keychain
    expect kept "$(as_user security find-generic-password -s mail -w)"
    if [ "$attack" = owner ]; then
        tpm tpm2_changeauth -c o -p attacker >/dev/null
        # The TPM is the machine's again: the keychain is sealed to it, and escrowed anew.
        printf 'new\n' | as_user security tpm-enroll 2>"$case_dir/err" | grep -q '^recovery key: '
        grep -q 'also escrowed' "$case_dir/err"
        grep -q 'warning: TPM lockout authorization empty' "$case_dir/err"
        as_user security tpm-status | grep -q "^escrow: *the recovery key, sealed"
    else
        # Sealed again to the cleared TPM, the escrow still holds its recovery key.
        as_user security tpm-status | grep -q '^sealed: *yes, to this TPM'
        as_user security tpm-status | grep -q "^escrow: *the recovery key, sealed"
    fi
}

check "a login without a password unlocks an enrolled keychain" passwordless_login_unlocks
check "without enrolment a login without a password unlocks nothing" without_enrolment_nothing_unlocks
check "a changed PCR refuses, the login still succeeds" boot_state_change_refuses_and_the_login_goes_on
check "the machine's key: root's, the user cannot read it" the_machine_key_is_roots
check "a service without the option does not unlock" a_service_without_the_option_does_not_unlock
check "su and sudo (another user's real uid, PAM_RUSER) are refused" su_and_sudo_are_refused
check "unenrol, unseal and rotation remove it" unenrol_removes_it
check "a TPM that answers wrongly or not at all never blocks a login" a_tpm_that_answers_wrongly_never_blocks_a_login
check "a password login: through the TPM of tpm_tcti=, an older copy refused by its counter" a_password_login_goes_through_the_tpm_and_its_counter
check "the machine's key made by several sessions at once under umask 077: one pair, readable" the_machine_key_made_at_once_is_one_pair
check "another user's copy of the keychain, or of its passwordless record, opens nothing" another_users_box_opens_nothing
check "the worker's reply pipe is not the TPM helper's: held open, it blocks no login" a_reply_pipe_held_open_never_blocks_a_login
check "a first login with auto_create tpm_enroll: the new login keychain sealed, its recovery key marked unshown" first_login_with_tpm_enroll_seals
check "a first login with tpm_enroll and no TPM: the login goes on, the keychain unsealed, a log line" first_login_without_a_tpm_is_unsealed
check "a first login follows the user's default; no_tpm_enroll overrides it" first_login_follows_the_default
check "a first login seals nothing without an escrow key only root can change" first_login_without_an_escrow_key_is_unsealed
check "a first-login keychain after tpm2_changeauth -c o: the escrow's recovery key opens it, items intact" first_login_keychain_survives owner
check "a first-login keychain after tpm2_clear: the escrow's recovery key opens it, items intact" first_login_keychain_survives clear

summary
