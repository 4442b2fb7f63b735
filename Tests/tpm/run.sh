#!/usr/bin/env bash
# Keychains sealed to a TPM 2.0, against Debian's swtpm: two software TPMs stand for two machines,
# each on 127.0.0.1 with its own state folder and free ports, started here and stopped at the end
# (and by `timeout` should this script die first). The built `security` reaches them through
# keychain-tpm-helper and tpm2-tss's swtpm TCTI ($KEYCHAIN_TPM_TCTI); tpm2-tools only look (the
# TPM's dictionary-attack counter, what it holds) and set the test's lockout threshold. Each case
# has its own HOME and XDG folders; every keychain made is deleted, with its kernel keys.
#
#   Tests/tpm/run.sh [BIN]      BIN: the folder of security and keychain-tpm-helper (.build/debug)
set -uo pipefail
bin=$(realpath "${1:-.build/debug}")
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$bin:$PATH"
. "$here/../lib.sh"
# shellcheck source=Tests/broker-lib.sh
. "$here/../broker-lib.sh"

for tool in swtpm tpm2_getcap tpm2_dictionarylockout tpm2_flushcontext tpm2_pcrreset tpm2_pcrextend python3; do
    command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install swtpm swtpm-tools tpm2-tools python3)"; exit 1; }
done
[ -x "$bin/security" ] && [ -x "$bin/keychain-tpm-helper" ] && [ -x "$bin/keychain-tpm-probe" ] || { echo "build security, keychain-tpm-helper and keychain-tpm-probe first"; exit 1; }

work=$(mktemp -d /tmp/keychain-tpm-XXXXXX)
pids=()
stop_all() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    broker_teardown
    wait 2>/dev/null
    rm -rf "$work"
}
trap stop_all EXIT

# start_tpm NAME: a fresh swtpm; sets NAME_port and NAME_tcti. At most 30 minutes, whatever happens.
start_tpm() {
    local name=$1 port dir
    port=$(free_port)
    dir=$work/$name
    mkdir -p "$dir"
    timeout 1800 swtpm socket --tpm2 --server type=tcp,port="$port",bindaddr=127.0.0.1 \
        --ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 --tpmstate dir="$dir" \
        --flags not-need-init,startup-clear > "$dir.log" 2>&1 &
    pids+=($!)
    # shellcheck disable=SC2154 # first_port/second_port and _tcti are made here, by name
    printf -v "${name}_port" %s "$port"
    printf -v "${name}_tcti" %s "swtpm:host=127.0.0.1,port=$port"
    for _ in $(seq 1 100); do
        TPM2TOOLS_TCTI="swtpm:host=127.0.0.1,port=$port" tpm2_getcap properties-fixed >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "swtpm $name did not start"; cat "$dir.log"; exit 1
}

start_tpm first
start_tpm second
start_tpm third

# tpm TCTI TOOL ARGS...: a tpm2-tools command against one of the TPMs.
tpm() { local tcti=$1; shift; TPM2TOOLS_TCTI=$tcti "$@"; }

# The TPM's counter of wrong authorizations, and whether it is in lockout.
failures() { tpm "$1" tpm2_getcap properties-variable | sed -n 's/^TPM2_PT_LOCKOUT_COUNTER: *//p'; }
in_lockout() { tpm "$1" tpm2_getcap properties-variable | sed -n 's/^ *inLockout: *//p'; }

# Nothing left in a TPM without a resource manager: no transient object, no loaded session.
no_leftovers() {
    # shellcheck disable=SC2154 # set by printf -v in start_tpm
    for tcti in "$first_tcti" "$second_tcti"; do
        expect "" "$(tpm "$tcti" tpm2_getcap handles-transient)" "transient objects left in $tcti"
        expect "" "$(tpm "$tcti" tpm2_getcap handles-loaded-session)" "sessions left in $tcti"
    done
}

# The platform hierarchy as firmware leaves it on a real machine (a password no one knows), and
# open again as swtpm starts (no password).
close_platform() { tpm "$first_tcti" tpm2_changeauth -c p firmware-only; }
open_platform() { tpm "${1:-$first_tcti}" tpm2_changeauth -c p -p firmware-only >/dev/null 2>&1 || true; }
# The attributes of NV index INDEX (whole: grep -q would cut tpm2-tools off, and pipefail fail it).
nv_attributes() { tpm "$first_tcti" tpm2_nvreadpublic "$1" | sed -n 's/^ *friendly: \(.*|.*\)/\1/p'; }

# TPM2_NV_UndefineSpace of INDEX with the owner's empty authorization, sent as raw bytes so that
# the TPM decides, not tpm2-tools (which refuses a policy-delete index itself); its response code.
owner_undefine() {
    printf '80020000001f0000012240000001%08x00000009400000090000000000' "$1" | xxd -r -p \
        | tpm "$first_tcti" tpm2_send | xxd -p | cut -c13-20
}

fresh() {
    case_dir=$(mktemp -d "$work/case-XXXXXX")
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config
    export KEYCHAIN_TPM_TCTI=$first_tcti
    unset KEYCHAIN_PATH KEYCHAIN_TPM_TIMEOUT KEYCHAIN_TPM_EVENT_LOG
    # Each case starts with TPMs that count 5 wrong passwords before locking out, none counted.
    for tcti in "$first_tcti" "$second_tcti"; do
        tpm "$tcti" tpm2_flushcontext -t; tpm "$tcti" tpm2_flushcontext -l
        tpm "$tcti" tpm2_dictionarylockout -c
        tpm "$tcti" tpm2_dictionarylockout -s -n 5 -t 600 -l 600
        open_platform "$tcti"
    done >/dev/null 2>&1
    printf 'pw\n' | security create-keychain
}

finish() {
    for kc in "$case_dir"/data/keychains/*.keychain-db "$case_dir"/m2/data/keychains/*.keychain-db; do
        [ -e "$kc" ] && security delete-keychain "$kc" >/dev/null 2>&1
    done
    rm -rf "$case_dir"
}

# The second machine: its own HOME, its own TPM.
on_second() {
    HOME=$case_dir/m2 XDG_DATA_HOME=$case_dir/m2/data XDG_CONFIG_HOME=$case_dir/m2/config KEYCHAIN_TPM_TCTI=${second_machine_tcti:-$second_tcti} "$@"
}

# Seals the login keychain to the first TPM and keeps the recovery key in $key.
enroll() {
    local out
    out=$(printf 'pw\n' | security tpm-enroll 2>"$case_dir/enroll.err")
    key=$(echo "$out" | sed -n 's/^recovery key: //p')
    [[ $key =~ ^[0-9]{6}(-[0-9]{6}){7}$ ]] || { echo "no recovery key in: $out"; cat "$case_dir/enroll.err"; return 1; }
}

# The keychain file (with its WAL, as a copy of the folder would have it) moved to the second
# machine; the first machine's keychain is deleted, so that its keys leave this user's kernel
# keyring (both "machines" share it here; the copy has the same identity).
move_to_second() {
    mkdir -m 700 "$case_dir/m2" "$case_dir/m2/data" "$case_dir/m2/data/keychains"
    for f in "$XDG_DATA_HOME"/keychains/login.keychain-db*; do cp -p "$f" "$case_dir/m2/data/keychains/"; done
    security delete-keychain login >/dev/null
}

all_classes() {
    security add-generic-password -a u -s when-unlocked -w p1 2>/dev/null
    security add-generic-password -a u -s after-first-unlock -w p2 --accessibility afterFirstUnlock 2>/dev/null
    security add-generic-password -a u -s device-when-unlocked -w p3 --accessibility whenUnlockedThisDeviceOnly 2>/dev/null
    security add-generic-password -a u -s device-after-first-unlock -w p4 --accessibility afterFirstUnlockThisDeviceOnly 2>/dev/null
    security add-generic-password -a u -s device-always -w p5 --accessibility alwaysThisDeviceOnly 2>/dev/null
}

# keychain-broker as Tests/broker-lib.sh starts it (its own system user, setpriv with only
# CAP_SYS_PTRACE), on a socket under /run; the cases name it with KEYCHAIN_BROKER_SOCKET.
start_broker() {
    broker_setup "kctpmb$$" kc-tpm-broker && broker_copy "$bin" keychain-broker && broker_start
}

# --- cases ---------------------------------------------------------------------------------

# A keychain sealed to the TPM stays in the kernel keyring while a broker runs (not in its keeping
# in this stage) and works as before; sealing a keychain the broker keeps is refused, said plainly.
sealed_keychain_stays_in_kernel_with_a_broker() {
    local out status
    security add-generic-password -a u -s sealed-svc -w sealed-secret 2>/dev/null
    enroll
    security lock-keychain
    # The case runs in a subshell: its broker is stopped when that ends, failed or not.
    trap broker_teardown EXIT
    start_broker
    export KEYCHAIN_BROKER_SOCKET=$broker_socket
    printf 'pw\n' | security unlock-keychain
    security status | grep -q 'kernel persistent keyring' || { security status; return 1; }
    expect sealed-secret "$(security find-generic-password -s sealed-svc -w)"
    security add-generic-password -a u -s added-svc -w added-secret
    expect added-secret "$(security find-generic-password -s added-svc -w)"
    no_leftovers

    # A keychain the broker keeps: tpm-enroll needs the class keys, which only the broker holds.
    printf 'pw2\n' | security create-keychain "$case_dir/kept.keychain-db"
    security status "$case_dir/kept.keychain-db" | grep -q 'custody of keychain-broker'
    status=0
    out=$(printf 'pw2\n' | security tpm-enroll "$case_dir/kept.keychain-db" 2>&1) || status=$?
    echo "$out"
    # errSecUnimplemented (-4), as `security` exits with an OSStatus: its low byte.
    expect 252 "$status" "tpm-enroll's exit status"
    grep -q '(errSecUnimplemented)$' <<< "$out"
    grep -q "not available yet for a keychain in keychain-broker's custody" <<< "$out"
    security status "$case_dir/kept.keychain-db" | grep -q '^TPM: *present, not used'
    unset KEYCHAIN_BROKER_SOCKET
    broker_teardown
}

enrol_prints_a_recovery_key() {
    all_classes
    expect "TPM:               present, not used: the password alone protects this keychain (\`security tpm-enroll\` seals it to the TPM)" \
        "$(security status | grep '^TPM:')"
    enroll
    grep -q 'shown only this once' "$case_dir/enroll.err"
    security tpm-status | grep -q '^sealed: *yes, to this TPM'
    security tpm-status | grep -q '^ThisDeviceOnly: *2 item'
    expect "TPM:               sealed to this machine's TPM (\`security tpm-status\` for more)" "$(security status | grep '^TPM:')"
    # Unlocked as it was: every item reads.
    for s in when-unlocked:p1 after-first-unlock:p2 device-when-unlocked:p3 device-after-first-unlock:p4 device-always:p5; do
        expect "${s#*:}" "$(security find-generic-password -s "${s%%:*}" -w)" "${s%%:*}"
    done
    # Sealed once: a second enrolment is refused and changes nothing.
    expect 206 "$(printf 'pw\n' | status_of security tpm-enroll)"
    # The file says version 3 and keeps the sealed object, no password-only key.
    expect 3 "$(sqlite3 "$XDG_DATA_HOME/keychains/login.keychain-db" "SELECT hex(value) FROM keychain WHERE name = 'version'" | sed 's/^0*//')"
    no_leftovers
}

right_password_unlocks() {
    security add-generic-password -a u -s svc -w secret 2>/dev/null
    enroll
    security lock-keychain
    expect 36 "$(status_of security find-generic-password -s svc -w)" "locked"
    printf 'pw\n' | security unlock-keychain
    expect secret "$(security find-generic-password -s svc -w)"
    expect 0x0 "$(failures "$first_tcti")" "the right password counts nothing"
    no_leftovers
}

wrong_password_is_counted_by_the_tpm() {
    enroll
    security lock-keychain
    out=$(printf 'wrong\n' | security unlock-keychain 2>&1) && return 1
    grep -q 'wrong password for this keychain; the TPM counted the attempt (1 of 5' <<< "$out"
    grep -q '(errSecAuthFailed)' <<< "$out"
    expect 0x1 "$(failures "$first_tcti")" "the TPM's own counter"
    expect 51 "$(printf 'wrong again\n' | status_of security unlock-keychain)"
    expect 0x2 "$(failures "$first_tcti")"
    security tpm-status | grep -q '2 of 5 wrong passwords counted'
    printf 'pw\n' | security unlock-keychain
    no_leftovers
}

lockout_refuses_even_the_right_password() {
    tpm "$first_tcti" tpm2_dictionarylockout -s -n 3 -t 600 -l 600 >/dev/null
    security add-generic-password -a u -s svc -w secret 2>/dev/null
    enroll
    security lock-keychain
    for n in 1 2 3; do expect 51 "$(printf 'wrong%s\n' $n | status_of security unlock-keychain)" "wrong $n"; done
    expect 1 "$(in_lockout "$first_tcti")" "the TPM is in lockout"
    out=$(printf 'pw\n' | security unlock-keychain 2>&1) && return 1
    grep -q 'dictionary-attack lockout' <<< "$out"
    grep -q 'the right one too' <<< "$out"
    grep -q '(errSecQuotaExceeded)' <<< "$out"
    expect 244 "$(printf 'pw\n' | status_of security unlock-keychain)"
    expect 36 "$(status_of security find-generic-password -s svc -w)" "still locked"
    security tpm-status | grep -q 'in dictionary-attack lockout'
    # The TPM's owner ends it (lockout authorization); the right password works again.
    tpm "$first_tcti" tpm2_dictionarylockout -c >/dev/null
    printf 'pw\n' | security unlock-keychain
    expect secret "$(security find-generic-password -s svc -w)"
    no_leftovers
}

copy_on_another_tpm_needs_the_recovery_key() {
    all_classes
    enroll
    move_to_second
    # The right password, on the other machine: refused before any authorization reaches its TPM.
    out=$(printf 'pw\n' | on_second security unlock-keychain 2>&1) && return 1
    grep -q 'sealed to another TPM' <<< "$out"
    grep -q 'tpm-recover' <<< "$out"
    expect 255 "$(printf 'pw\n' | on_second status_of security unlock-keychain)"
    expect 0x0 "$(failures "$second_tcti")" "nothing was tried on the second TPM"
    on_second security tpm-status | grep -q '^sealed: *yes, to another TPM'
    # A mistyped group, a well-formed wrong key: refused, the first before anything is tried.
    typo="$(( (${key:0:1} + 1) % 10 ))${key:1}"
    out=$(printf '%s\nnew\n' "$typo" | on_second security tpm-recover 2>&1) && return 1
    grep -q 'group 1 of the recovery key is mistyped' <<< "$out"
    expect 51 "$(printf '000000-000000-000000-000000-000000-000000-000000-000000\nnew\n' | on_second status_of security tpm-recover)"
    # The recovery key: everything but the ThisDeviceOnly items comes back, sealed to this TPM.
    out=$(printf '%s\nnew\n' "$key" | on_second security tpm-recover 2>&1)
    grep -q '2 ThisDeviceOnly items were bound to the old TPM and are gone' <<< "$out"
    grep -q "sealed to this machine's TPM now" <<< "$out"
    on_second security tpm-status | grep -q '^sealed: *yes, to this TPM'
    expect p1 "$(on_second security find-generic-password -s when-unlocked -w)"
    expect p2 "$(on_second security find-generic-password -s after-first-unlock -w)"
    expect p5 "$(on_second security find-generic-password -s device-always -w)"
    expect 44 "$(on_second status_of security find-generic-password -s device-when-unlocked)"
    expect 44 "$(on_second status_of security find-generic-password -s device-after-first-unlock)"
    # Re-enrolled on the second TPM: its password goes through that TPM, which counts.
    on_second security lock-keychain
    expect 51 "$(printf 'pw\n' | on_second status_of security unlock-keychain)" "the old password"
    expect 0x1 "$(failures "$second_tcti")"
    printf 'new\n' | on_second security unlock-keychain
    expect p1 "$(on_second security find-generic-password -s when-unlocked -w)"
    # New ThisDeviceOnly items belong to the new TPM.
    on_second security add-generic-password -a u -s device-new -w p6 --accessibility whenUnlockedThisDeviceOnly 2>/dev/null
    on_second security tpm-status | grep -q '^ThisDeviceOnly: *1 item'
    # The recovery key stays valid.
    printf '%s\nnewer\n' "$key" | on_second security tpm-recover 2>/dev/null
    no_leftovers
}

device_only_items_go_with_the_tpm() {
    all_classes
    enroll
    move_to_second
    # No TPM at all on the second machine: the recovery key gives a password-only keychain.
    second_machine_tcti=none
    printf '%s\nnew\n' "$key" | on_second security tpm-recover 2>"$case_dir/err"
    grep -q 'there is no TPM here' "$case_dir/err"
    on_second security tpm-status | grep -q '^sealed: *no'
    for s in when-unlocked:p1 after-first-unlock:p2 device-always:p5; do
        expect "${s#*:}" "$(on_second security find-generic-password -s "${s%%:*}" -w)" "${s%%:*}"
    done
    for s in device-when-unlocked device-after-first-unlock; do
        expect 44 "$(on_second status_of security find-generic-password -s "$s")" "$s is gone"
    done
    expect 2 "$(sqlite3 "$case_dir/m2/data/keychains/login.keychain-db" "SELECT hex(value) FROM keychain WHERE name = 'version'" | sed 's/^0*//')"
    on_second security lock-keychain
    printf 'new\n' | on_second security unlock-keychain
}

password_change_and_rotation_keep_the_binding() {
    all_classes
    enroll
    security set-keychain-password -o pw -p two 2>/dev/null
    security lock-keychain
    expect 51 "$(printf 'pw\n' | status_of security unlock-keychain)" "the old password"
    printf 'two\n' | security unlock-keychain
    expect p3 "$(security find-generic-password -s device-when-unlocked -w)"
    # Rotation: new keys, so a new recovery key; the old one opens nothing.
    out=$(security set-keychain-password --rotate-keys -o two -p three 2>/dev/null)
    new_key=$(echo "$out" | sed -n 's/^recovery key: //p')
    [[ $new_key =~ ^[0-9]{6}(-[0-9]{6}){7}$ ]]
    [ "$new_key" != "$key" ]
    security lock-keychain
    printf 'three\n' | security unlock-keychain
    expect p3 "$(security find-generic-password -s device-when-unlocked -w)"
    expect p1 "$(security find-generic-password -s when-unlocked -w)"
    expect 51 "$(printf '%s\nfour\n' "$key" | status_of security tpm-recover)" "the old recovery key"
    printf '%s\nfour\n' "$new_key" | security tpm-recover 2>/dev/null
    no_leftovers
}

removing_the_binding() {
    all_classes
    enroll
    expect 51 "$(printf 'wrong\n' | status_of security tpm-unenroll)"
    printf 'pw\n' | security tpm-unenroll 2>"$case_dir/err"
    grep -q 'no longer sealed' "$case_dir/err"
    security tpm-status | grep -q '^sealed: *no'
    expect 2 "$(sqlite3 "$XDG_DATA_HOME/keychains/login.keychain-db" "SELECT hex(value) FROM keychain WHERE name = 'version'" | sed 's/^0*//')"
    expect 0 "$(sqlite3 "$XDG_DATA_HOME/keychains/login.keychain-db" "SELECT count(*) FROM keychain WHERE name IN ('tpm', 'recovery', 'wrap.Au', 'wrap.Cu')")"
    # No TPM needed any more, nothing lost.
    export KEYCHAIN_TPM_TCTI=none
    security lock-keychain -a
    printf 'pw\n' | security unlock-keychain
    for s in when-unlocked:p1 after-first-unlock:p2 device-when-unlocked:p3 device-after-first-unlock:p4 device-always:p5; do
        expect "${s#*:}" "$(security find-generic-password -s "${s%%:*}" -w)" "${s%%:*}"
    done
    expect 206 "$(printf '%s\nx\n' "$key" | status_of security tpm-recover)" "no recovery key any more"
    no_leftovers
}

no_tpm_is_todays_behaviour() {
    # Nothing listens there: tpm2-tss cannot connect.
    closed=$(free_port)
    for tcti in "swtpm:host=127.0.0.1,port=$closed" none; do
        export KEYCHAIN_TPM_TCTI=$tcti
        security add-generic-password -a u -s "svc-$closed-${tcti%%:*}" -w secret 2>/dev/null
        security lock-keychain
        printf 'pw\n' | security unlock-keychain
        expect secret "$(security find-generic-password -s "svc-$closed-${tcti%%:*}" -w)"
        expect 1 "$(security status | grep -c '^TPM: *none usable here')" "said once in status"
        security status | grep '^TPM:' | grep -q 'the password alone protects this keychain'
        security tpm-status | grep -q '^TPM: *none usable here'
        out=$(printf 'pw\n' | security tpm-enroll 2>&1) && return 1
        grep -q '(errSecServiceNotAvailable)' <<< "$out"
        ! grep -q 'recovery key:' <<< "$out"
        expect 2 "$(sqlite3 "$XDG_DATA_HOME/keychains/login.keychain-db" "SELECT hex(value) FROM keychain WHERE name = 'version'" | sed 's/^0*//')"
    done
    # A new keychain made with no TPM is as before too.
    printf 'pw2\n' | security create-keychain other
    printf 'pw2\n' | security unlock-keychain other
}

sealed_keychain_without_its_tpm() {
    security add-generic-password -a u -s svc -w secret 2>/dev/null
    enroll
    security lock-keychain
    out=$(printf 'pw\n' | KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$(free_port)" security unlock-keychain 2>&1) && return 1
    grep -q 'sealed to a TPM, and there is no TPM reachable' <<< "$out"
    grep -q 'security tpm-recover' <<< "$out"
    expect 255 "$(printf 'pw\n' | KEYCHAIN_TPM_TCTI=none status_of security unlock-keychain)"
    expect 36 "$(status_of security find-generic-password -s svc -w)" "still locked"
    printf 'pw\n' | security unlock-keychain
}

lying_tpm_gives_errors() {
    # Sealed to the second TPM, then reached through a man in the middle that damages its answers
    # (one in three, in seeded random ways). Every attempt ends in a status: success with the
    # right secret, or an error with the keychain still locked; never a signal, a hang or a key.
    export KEYCHAIN_TPM_TCTI=$second_tcti
    tpm "$second_tcti" tpm2_dictionarylockout -s -n 1000 -t 1 -l 1 >/dev/null
    security add-generic-password -a u -s svc -w secret 2>/dev/null
    enroll
    liar=$(free_port)
    # shellcheck disable=SC2154 # set by printf -v in start_tpm
    timeout 600 python3 "$here/lying-tpm.py" "$liar" "$second_port" 20261124 600 0.35 &
    liar_pid=$!
    sleep 0.5
    export KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$liar" KEYCHAIN_TPM_TIMEOUT=3
    ok=0 failed=0
    for n in $(seq 1 24); do
        security lock-keychain
        status=$(printf 'pw\n' | timeout 20 security unlock-keychain >/dev/null 2>"$case_dir/err"; echo $?)
        case $status in
            0) expect secret "$(security find-generic-password -s svc -w)" "attempt $n"; ok=$((ok + 1)) ;;
            49|51|93|244|252|255) expect 36 "$(status_of security find-generic-password -s svc -w)" "attempt $n left it locked"
                failed=$((failed + 1)) ;;
            *) echo "attempt $n: status $status"; cat "$case_dir/err"; kill $liar_pid; return 1 ;;
        esac
        # Objects the damaged exchanges left behind in the real TPM.
        tpm "$second_tcti" tpm2_flushcontext -t >/dev/null 2>&1; tpm "$second_tcti" tpm2_flushcontext -l >/dev/null 2>&1
    done
    # tpm-status and tpm-enroll through it: errors or answers, never a crash.
    for n in 1 2 3 4 5 6; do
        status=$(timeout 20 security tpm-status >/dev/null 2>&1; echo $?)
        [ "$status" -lt 128 ] && [ "$status" -ne 124 ] || { echo "tpm-status: $status"; kill $liar_pid; return 1; }
    done
    kill $liar_pid
    echo "through the lying TPM: $ok unlocked, $failed refused"
    [ "$failed" -gt 0 ]
    export KEYCHAIN_TPM_TCTI=$second_tcti
    printf 'pw\n' | security unlock-keychain
}

an_older_copy_put_back_is_noticed() {
    nv() { tpm "$first_tcti" tpm2_getcap handles-nv-index | { grep -c '^- ' || true; }; }
    indices=$(nv)
    security add-generic-password -a u -s kept -w one 2>/dev/null
    enroll
    kc=$XDG_DATA_HOME/keychains/login.keychain-db
    count() { security tpm-status | sed -n 's/^rollback: *count \([0-9]*\) .*/\1/p'; }
    start=$(count)
    [ -n "$start" ]
    # One NV index more: this keychain's counter.
    expect $((indices + 1)) "$(nv)"
    # A consistent copy, WAL included, as a backup tool takes it.
    sqlite3 "$kc" ".backup '$case_dir/old'"
    # Writes move nothing (no wear per item); each unlock moves it by one.
    for n in 1 2 3 4 5 6 7 8 9 10; do printf 'v%s\n' "$n" | security add-generic-password -U -a u -s "w$n" -w; done
    expect "$start" "$(count)" "twenty writes"
    security delete-generic-password -a u -s kept >/dev/null
    for n in 1 2 3; do security lock-keychain; printf 'pw\n' | security unlock-keychain; done
    expect $((start + 3)) "$(count)" "three unlocks"
    expect 51 "$(printf 'wrong\n' | status_of security unlock-keychain)"
    expect $((start + 3)) "$(count)" "a wrong password moves nothing"
    # The older copy put back whole (with its WAL gone, as a restored backup has it).
    security lock-keychain
    cp "$case_dir/old" "$kc"; rm -f "$kc-wal" "$kc-shm"
    out=$(printf 'pw\n' | security unlock-keychain 2>&1) && return 1
    grep -q 'this keychain file is an older copy: it was last unlocked at count' <<< "$out"
    grep -q 'accept-older-copy' <<< "$out"
    grep -q '(errSecInvalidKeychain)' <<< "$out"
    expect 49 "$(printf 'pw\n' | status_of security unlock-keychain)"
    expect 36 "$(status_of security find-generic-password -s kept -w)" "still locked"
    # The user says it is theirs: it opens as it was, and counts from here.
    printf 'pw\n' | security unlock-keychain --accept-older-copy
    expect one "$(security find-generic-password -s kept -w)"
    security lock-keychain
    printf 'pw\n' | security unlock-keychain
    # Unsealed, its counter leaves the TPM; so it does when a sealed keychain is deleted unlocked.
    printf 'pw\n' | security tpm-unenroll 2>/dev/null
    expect "$indices" "$(nv)" "after tpm-unenroll"
    enroll
    expect $((indices + 1)) "$(nv)"
    security delete-keychain login
    expect "$indices" "$(nv)" "after delete-keychain"
    no_leftovers
}

# Another user with the TPM (group tss, the owner's empty authorization) undefines the keychain's
# counter and takes its four candidate indices: the user is told, and `--accept-older-copy` must
# still open the keychain (without a counter) rather than lock them out for as long as the indices
# stay taken.
counter_taken_by_another_user_is_no_lockout() {
    nvs() { tpm "$first_tcti" tpm2_getcap handles-nv-index | sed -n 's/^- //p' | sort; }
    # As on a real machine, where the counter is the owner's and so anyone's with the TPM to remove.
    close_platform
    before=$(nvs)
    security add-generic-password -a u -s kept -w one 2>/dev/null
    enroll
    index=$(comm -13 <(echo "$before") <(nvs) | head -1)
    [ -n "$index" ]
    security lock-keychain
    tpm "$first_tcti" tpm2_nvundefine -C o "$index" >/dev/null
    # The counter is the first free one of its four candidates: they are index..index+3.
    for n in 0 1 2 3; do
        tpm "$first_tcti" tpm2_nvdefine -C o -s 8 "$(printf '0x%x' $((index + n)))" >/dev/null || return 1
    done
    expect 49 "$(printf 'pw\n' | status_of security unlock-keychain)" "counter gone"
    printf 'pw\n' | security unlock-keychain --accept-older-copy || return 1
    expect one "$(security find-generic-password -s kept -w)"
    security lock-keychain
    printf 'pw\n' | security unlock-keychain || return 1
    expect one "$(security find-generic-password -s kept -w)"
    for n in 0 1 2 3; do tpm "$first_tcti" tpm2_nvundefine -C o "$(printf '0x%x' $((index + n)))" >/dev/null; done
    no_leftovers
}

# The evil maid (write access to the file, the TPM's owner hierarchy without a password) puts an
# older copy back, deletes its `counter` row with plain SQL (no key needed) and undefines the TPM's
# counter, so that it looks like a keychain sealed before counters: the keybag's TPM record, under
# the wrapped keys' tags, says it was counted, and the unlock refuses until the user accepts it.
older_copy_without_record_or_counter_is_refused() {
    nvs() { tpm "$first_tcti" tpm2_getcap handles-nv-index | sed -n 's/^- //p' | sort; }
    close_platform
    before=$(nvs)
    security add-generic-password -a u -s kept -w one 2>/dev/null
    enroll
    index=$(comm -13 <(echo "$before") <(nvs) | head -1)
    [ -n "$index" ]
    security tpm-status | grep -q '^rollback: *count [0-9]* .*recorded in the keybag'
    kc=$XDG_DATA_HOME/keychains/login.keychain-db
    sqlite3 "$kc" ".backup '$case_dir/old'"
    security delete-generic-password -a u -s kept >/dev/null
    for n in 1 2; do security lock-keychain; printf 'pw\n' | security unlock-keychain; done
    security lock-keychain
    cp "$case_dir/old" "$kc"; rm -f "$kc-wal" "$kc-shm"
    sqlite3 "$kc" "DELETE FROM keychain WHERE name = 'counter'"
    tpm "$first_tcti" tpm2_nvundefine -C o "$index" >/dev/null
    out=$(printf 'pw\n' | security unlock-keychain 2>&1) && return 1
    grep -q 'this keychain was sealed with a rollback counter, but neither its record in the file nor the counter in the TPM is there' <<< "$out"
    grep -q 'accept-older-copy' <<< "$out"
    grep -q '(errSecInvalidKeychain)' <<< "$out"
    expect 49 "$(printf 'pw\n' | status_of security unlock-keychain)"
    expect 36 "$(status_of security find-generic-password -s kept -w)" "still locked"
    printf 'pw\n' | security unlock-keychain --accept-older-copy
    expect one "$(security find-generic-password -s kept -w)"
    security lock-keychain
    printf 'pw\n' | security unlock-keychain
    security tpm-status | grep -q '^rollback: *count [0-9]* .*recorded in the keybag'
    no_leftovers
}

# Two unlocks at once (two ssh logins, a login and a screen unlock): each moves the counter by
# one, and neither may read the other's step as an older copy of the file.
parallel_unlocks_are_no_older_copy() {
    security add-generic-password -a u -s kept -w one 2>/dev/null
    enroll
    for round in $(seq 1 12); do
        for n in 1 2 3; do
            (printf 'pw\n' | security unlock-keychain 2>"$case_dir/par$n.err"; echo $? > "$case_dir/par$n.rc") &
        done
        wait
        for n in 1 2 3; do
            # swtpm has no resource manager (as /dev/tpmrm0 is): a full TPM is its limit, not ours.
            grep -q 'OBJECT_MEMORY\|SESSION_MEMORY' "$case_dir/par$n.err" && continue
            [ "$(cat "$case_dir/par$n.rc")" = 0 ] || { echo "round $round, unlock $n:"; cat "$case_dir/par$n.err"; return 1; }
        done
        tpm "$first_tcti" tpm2_flushcontext -t >/dev/null 2>&1; tpm "$first_tcti" tpm2_flushcontext -s >/dev/null 2>&1
    done
    security lock-keychain
    printf 'pw\n' | security unlock-keychain
    expect one "$(security find-generic-password -s kept -w)"
}

# PCR 16 (resettable, debug) of the first TPM: back to zeros, or changed as a new boot chain would.
pcr16_reset() { tpm "$first_tcti" tpm2_pcrreset 16 >/dev/null; }
pcr16_change() { tpm "$first_tcti" tpm2_pcrextend "16:sha256=$(printf '%064d' 1)" >/dev/null; }

pcr_binding_refuses_another_boot_chain() {
    export KEYCHAIN_TPM_EVENT_LOG=/nonexistent
    pcr16_reset
    security add-generic-password -a u -s svc -w secret 2>/dev/null
    out=$(printf 'pw\n' | security tpm-enroll --pcrs 16 2>"$case_dir/enroll.err")
    key=$(echo "$out" | sed -n 's/^recovery key: //p')
    [[ $key =~ ^[0-9]{6}(-[0-9]{6}){7}$ ]] || { echo "no recovery key in: $out"; cat "$case_dir/enroll.err"; return 1; }
    grep -q 'and to PCR 16 as they are now' "$case_dir/enroll.err"
    security tpm-status | grep -q '^PCRs: *16 (SHA-256)'
    security lock-keychain
    printf 'pw\n' | security unlock-keychain
    expect secret "$(security find-generic-password -s svc -w)"
    expect 0x0 "$(failures "$first_tcti")"
    # Another boot chain: refused with its own message and status, and the TPM counts nothing,
    # for the right password or a wrong one (the PCR policy fails before the authorization).
    pcr16_change
    security lock-keychain
    out=$(printf 'pw\n' | security unlock-keychain 2>&1) && return 1
    grep -q 'PCR 16 differs from the sealed value: the boot chain changed or a PCR was extended since boot (no boot event log readable at /nonexistent tells which)' <<< "$out"
    grep -q 'the TPM counted no wrong password' <<< "$out"
    grep -q '(errSecServiceNotAvailable)' <<< "$out"
    expect 255 "$(printf 'pw\n' | status_of security unlock-keychain)"
    expect 255 "$(printf 'wrong\n' | status_of security unlock-keychain)"
    expect 0x0 "$(failures "$first_tcti")" "a changed PCR is no wrong password"
    expect 36 "$(status_of security find-generic-password -s svc -w)" "still locked"
    # The boot chain back: it opens again, and a wrong password is still counted by the TPM.
    pcr16_reset
    expect 51 "$(printf 'wrong\n' | status_of security unlock-keychain)"
    expect 0x1 "$(failures "$first_tcti")" "a wrong password with a PCR binding"
    printf 'pw\n' | security unlock-keychain
    expect secret "$(security find-generic-password -s svc -w)"
    # Changed again: the recovery key opens it, sealed again to no PCRs (unless asked).
    pcr16_change
    security lock-keychain
    printf '%s\nnew\n' "$key" | security tpm-recover 2>"$case_dir/err" || { cat "$case_dir/err"; return 1; }
    grep -q 'to no PCRs' "$case_dir/err"
    expect secret "$(security find-generic-password -s svc -w)"
    security tpm-status | grep -q '^PCRs: *none'
    # tpm-enroll --pcrs on the sealed keychain binds it to this boot chain again; the same key.
    printf 'new\n' | security tpm-enroll --pcrs 16 2>/dev/null
    security tpm-status | grep -q '^PCRs: *16 (SHA-256)'
    security lock-keychain
    printf 'new\n' | security unlock-keychain
    pcr16_reset
    security lock-keychain
    expect 255 "$(printf 'new\n' | status_of security unlock-keychain)"
    printf '%s\nthird\n' "$key" | security tpm-recover --pcrs 16 2>"$case_dir/err" || { cat "$case_dir/err"; return 1; }
    grep -q 'and to PCR 16 as they are now' "$case_dir/err"
    security lock-keychain
    printf 'third\n' | security unlock-keychain
    # --pcrs none drops the binding: a changed PCR refuses nothing any more.
    printf 'third\n' | security tpm-enroll --pcrs none 2>/dev/null
    pcr16_change
    security lock-keychain
    printf 'third\n' | security unlock-keychain
    expect secret "$(security find-generic-password -s svc -w)"
    expect 2 "$(printf 'pw\n' | status_of security tpm-enroll --pcrs 24)" "a PCR out of range"
    pcr16_reset
}

# Another user of the TPM (group tss: the owner hierarchy's empty authorization) cannot undefine
# a keychain's counter: it is the platform hierarchy's, with TPMA_NV_POLICY_DELETE, and deleting it
# takes TPM2_NV_UndefineSpaceSpecial with the counter's own authorization value. Where firmware
# closed the platform hierarchy, the counter is the owner's as before, and still works.
counter_is_out_of_other_users_reach() {
    nvs() { tpm "$first_tcti" tpm2_getcap handles-nv-index | sed -n 's/^- //p' | sort; }
    before=$(nvs)
    security add-generic-password -a u -s kept -w one 2>/dev/null
    enroll
    index=$(comm -13 <(echo "$before") <(nvs) | head -1)
    [ -n "$index" ]
    attributes=$(nv_attributes "$index")
    [[ $attributes == *policydelete*platformcreate* ]] || { echo "the counter's attributes: $attributes"; return 1; }
    count() { security tpm-status | sed -n 's/^rollback: *count \([0-9]*\) .*/\1/p'; }
    start=$(count)
    security lock-keychain
    # The attack of the review: refused by the TPM (TPM_RC_ATTRIBUTES), and by tpm2-tools.
    expect 00000282 "$(owner_undefine "$index")" "TPM2_NV_UndefineSpace with the owner's authorization"
    tpm "$first_tcti" tpm2_nvundefine -C o "$index" >/dev/null 2>&1 && return 1
    tpm "$first_tcti" tpm2_nvundefine -C p "$index" >/dev/null 2>&1 && return 1
    expect "$index" "$(nvs | grep -x "$index")" "the counter is still there"
    printf 'pw\n' | security unlock-keychain || return 1
    expect $((start + 1)) "$(count)" "the right password opens it and moves the counter"
    expect one "$(security find-generic-password -s kept -w)"
    # tpm-unenroll removes it (its own authorization and the platform's): nothing left behind.
    printf 'pw\n' | security tpm-unenroll 2>/dev/null
    expect "$before" "$(nvs)" "after tpm-unenroll"
    # The platform hierarchy closed, as firmware leaves it: an owner's counter, as before, that
    # works and that the owner's authorization still removes (docs/security-model.md, limits).
    close_platform
    enroll
    index=$(comm -13 <(echo "$before") <(nvs) | head -1)
    [[ $(nv_attributes "$index") != *policydelete* ]] || return 1
    security lock-keychain
    printf 'pw\n' | security unlock-keychain || return 1
    expect 00000000 "$(owner_undefine "$index")" "an owner's counter"
    expect 49 "$(printf 'pw\n' | status_of security unlock-keychain)" "its counter gone"
    printf 'pw\n' | security unlock-keychain --accept-older-copy || return 1
    security add-generic-password -a u -s later -w two 2>/dev/null
    # The platform hierarchy open (as for a counter an earlier version made, of the owner's): the
    # next unlock moves the count to a protected counter and undefines the owner's.
    owner_index=$(comm -13 <(echo "$before") <(nvs))
    [[ $(nv_attributes "$owner_index") != *policydelete* ]] || return 1
    open_platform
    security lock-keychain
    printf 'pw\n' | security unlock-keychain || return 1
    expect 1 "$(comm -13 <(echo "$before") <(nvs) | wc -l)" "one counter after the move"
    index=$(comm -13 <(echo "$before") <(nvs))
    [ "$index" != "$owner_index" ]
    [[ $(nv_attributes "$index") == *policydelete*platformcreate* ]] || return 1
    expect 00000282 "$(owner_undefine "$index")" "the moved counter"
    start=$(count)
    for n in 1 2; do security lock-keychain; printf 'pw\n' | security unlock-keychain || return 1; done
    expect $((start + 2)) "$(count)" "unlocks after the move"
    expect two "$(security find-generic-password -s later -w)"
    no_leftovers
}

# A PCR extended after boot (anyone in group tss: tpm2_pcrextend 7) is told apart from a changed
# boot chain by replaying the boot event log: its own TPM here, whose PCR 7 "boot" measured one
# value, recorded in a log made for it.
pcr_extended_after_boot_is_told_apart() {
    # shellcheck disable=SC2154 # set by printf -v in start_tpm
    export KEYCHAIN_TPM_TCTI=$third_tcti KEYCHAIN_TPM_EVENT_LOG=$case_dir/event-log
    booted=$(printf 'secure boot db' | sha256sum | cut -c1-64)
    tpm "$third_tcti" tpm2_pcrextend "7:sha256=$booted" >/dev/null
    python3 "$here/event-log.py" "$KEYCHAIN_TPM_EVENT_LOG" "7:$booted"
    security add-generic-password -a u -s svc -w secret 2>/dev/null
    out=$(printf 'pw\n' | security tpm-enroll --pcrs 7 2>/dev/null)
    key=$(echo "$out" | sed -n 's/^recovery key: //p')
    [ -n "$key" ]
    security lock-keychain
    printf 'pw\n' | security unlock-keychain || return 1
    # Another user extends PCR 7: "extended after boot", not "the boot chain changed".
    tpm "$third_tcti" tpm2_pcrextend "7:sha256=$(printf 'another user' | sha256sum | cut -c1-64)" >/dev/null
    security lock-keychain
    out=$(printf 'pw\n' | security unlock-keychain 2>&1) && return 1
    grep -q 'PCR 7 was extended after boot: its value is not the one this boot.s event log replays to' <<< "$out" || { echo "$out"; return 1; }
    grep -q 'boot chain changed' <<< "$out" && return 1
    grep -q 'the TPM counted no wrong password' <<< "$out"
    expect 255 "$(printf 'pw\n' | status_of security unlock-keychain)"
    # No log readable: it says it cannot tell.
    out=$(printf 'pw\n' | KEYCHAIN_TPM_EVENT_LOG=$case_dir/none security unlock-keychain 2>&1) && return 1
    grep -q 'PCR 7 differs from the sealed value: the boot chain changed or a PCR was extended since boot' <<< "$out" || { echo "$out"; return 1; }
    # A log that accounts for the new value: the boot chain changed.
    python3 "$here/event-log.py" "$case_dir/changed-log" "7:$booted" "7:$(printf 'another user' | sha256sum | cut -c1-64)"
    out=$(printf 'pw\n' | KEYCHAIN_TPM_EVENT_LOG=$case_dir/changed-log security unlock-keychain 2>&1) && return 1
    grep -q 'the boot chain changed: PCR 7 no longer hold the values' <<< "$out" || { echo "$out"; return 1; }
    expect 36 "$(status_of security find-generic-password -s svc -w)" "still locked"
    # The way in, as documented: the recovery key.
    printf '%s\nnew\n' "$key" | security tpm-recover 2>/dev/null || return 1
    expect secret "$(security find-generic-password -s svc -w)"
    expect 0x0 "$(failures "$third_tcti")" "nothing counted"
}

# A TPM (or TCTI) that accepts and never answers: one time limit for the whole command, not one
# per TPM call (create-keychain --tpm made three calls of 30 s each: 91 s).
a_silent_tpm_bounds_the_whole_command() {
    security add-generic-password -a u -s svc -w secret 2>/dev/null
    enroll
    silent=$(free_port)
    timeout 120 python3 "$here/silent-tpm.py" "$silent" 110 &
    silent_pid=$!
    sleep 0.5
    # The old per-call limit cost create-keychain --tpm three limits (18 s here); one limit and the
    # command's own work (scrypt, slow on a loaded machine) stay well under two.
    limit=6
    export KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$silent" KEYCHAIN_TPM_TIMEOUT=$limit
    started=$(date +%s%N)
    status=0
    out=$(printf 'pw\n' | timeout 60 security create-keychain --tpm made 2>&1) || status=$?
    took=$(( ($(date +%s%N) - started) / 1000000 ))
    echo "create-keychain --tpm against a silent TPM: status $status after $took ms (limit $limit s)"
    expect 252 "$status" "create-keychain --tpm"
    grep -q "the TPM did not answer within $limit s (the most one command may wait for it" <<< "$out" || { echo "$out"; kill $silent_pid; return 1; }
    [ ! -e "$XDG_DATA_HOME/keychains/made.keychain-db" ] || { kill $silent_pid; return 1; }
    [ "$took" -lt $(( 2 * limit * 1000 )) ] || { kill $silent_pid; return 1; }
    security lock-keychain
    started=$(date +%s%N)
    status=0
    out=$(printf 'pw\n' | timeout 60 security unlock-keychain 2>&1) || status=$?
    took=$(( ($(date +%s%N) - started) / 1000000 ))
    echo "unlock-keychain against a silent TPM: status $status after $took ms"
    kill $silent_pid
    expect 252 "$status" "unlock-keychain"
    grep -q "the TPM did not answer within $limit s" <<< "$out" || { echo "$out"; return 1; }
    [ "$took" -lt $(( 2 * limit * 1000 )) ] || return 1
    expect 36 "$(status_of security find-generic-password -s svc -w)" "still locked"
    export KEYCHAIN_TPM_TCTI=$first_tcti
    unset KEYCHAIN_TPM_TIMEOUT
    printf 'pw\n' | security unlock-keychain
    expect secret "$(security find-generic-password -s svc -w)"
}

# --- sealed at creation ---------------------------------------------------------------------

create_with_tpm_seals_at_once() {
    security add-generic-password -a u -s other-svc -w x 2>/dev/null
    out=$(printf 'pw\n' | security create-keychain --tpm made 2>"$case_dir/create.err")
    key=$(echo "$out" | sed -n 's/^recovery key: //p')
    [[ $key =~ ^[0-9]{6}(-[0-9]{6}){7}$ ]] || { echo "no recovery key in: $out"; cat "$case_dir/create.err"; return 1; }
    grep -q 'shown only this once' "$case_dir/create.err"
    security tpm-status made | grep -q '^sealed: *yes, to this TPM'
    security tpm-status made | grep -q 'never shown' && return 1
    expect 3 "$(sqlite3 "$XDG_DATA_HOME/keychains/made.keychain-db" "SELECT hex(value) FROM keychain WHERE name = 'version'" | sed 's/^0*//')"
    security add-generic-password -a u -s svc -w secret made 2>/dev/null
    security lock-keychain made
    expect 51 "$(printf 'wrong\n' | status_of security unlock-keychain made)"
    expect 0x1 "$(failures "$first_tcti")" "the wrong password counted by the TPM"
    printf 'pw\n' | security unlock-keychain made
    expect secret "$(security find-generic-password -s svc -w made)"
    # The recovery key printed opens it without the TPM.
    security lock-keychain made
    printf '%s\nnew\n' "$key" | KEYCHAIN_TPM_TCTI=none security tpm-recover made 2>/dev/null
    expect secret "$(security find-generic-password -s svc -w made)"
    no_leftovers
}

create_with_tpm_and_no_tpm_creates_nothing() {
    for tcti in "swtpm:host=127.0.0.1,port=$(free_port)" none; do
        out=$(printf 'pw\n' | KEYCHAIN_TPM_TCTI=$tcti security create-keychain --tpm made 2>&1) && return 1
        grep -q '(errSecServiceNotAvailable)' <<< "$out"
        grep -q 'was not created' <<< "$out"
        grep -q 'recovery key:' <<< "$out" && return 1
        [ ! -e "$XDG_DATA_HOME/keychains/made.keychain-db" ] || { echo "made.keychain-db was left behind ($tcti)"; return 1; }
        security list-keychains | grep -q made.keychain-db && return 1
    done
    expect 255 "$(printf 'pw\n' | KEYCHAIN_TPM_TCTI=none status_of security tpm-enroll)" "tpm-enroll's status"
    expect 255 "$(printf 'pw\n' | KEYCHAIN_TPM_TCTI=none status_of security create-keychain --tpm made)" "the same as tpm-enroll's"
}

default_on_seals_new_keychains() {
    security tpm-enroll --default show | grep -q '^new keychains: *protected by their password alone at creation (not set)'
    expect "new keychains:   sealed to the TPM at creation (your choice, \`security tpm-enroll --default\`)" "$(security tpm-enroll --default on)"
    expect on "$(cat "$XDG_CONFIG_HOME/keychain/tpm-enroll")"
    security tpm-status | grep -q '^new keychains: *sealed to the TPM at creation'
    out=$(printf 'pw\n' | security create-keychain made 2>"$case_dir/create.err")
    grep -q '^recovery key: [0-9]\{6\}-' <<< "$out"
    security tpm-status made | grep -q '^sealed: *yes, to this TPM'
    # --no-tpm overrides the default.
    out=$(printf 'pw\n' | security create-keychain --no-tpm plain 2>&1)
    grep -q 'recovery key' <<< "$out" && return 1
    security tpm-status plain | grep -q '^sealed: *no'
    # The default on, no TPM: made with its password alone, said once for two keychains.
    printf 'pw\n' | KEYCHAIN_TPM_TCTI=none security create-keychain -p pw one two 2>"$case_dir/none.err"
    expect 1 "$(grep -c 'sealed to the TPM by default, but sealing failed' "$case_dir/none.err")" "said once"
    for kc in one two; do security tpm-status "$kc" | grep -q '^sealed: *no' || { echo "$kc sealed?"; return 1; }; done
    # --tpm and --no-tpm together are refused.
    printf 'pw\n' | security create-keychain --tpm --no-tpm three 2>/dev/null && return 1
    [ ! -e "$XDG_DATA_HOME/keychains/three.keychain-db" ]
    # Off, then back to the machine's default (none here: off).
    security tpm-enroll --default off | grep -q 'password alone at creation (your choice'
    printf 'pw\n' | security create-keychain four 2>/dev/null
    security tpm-status four | grep -q '^sealed: *no'
    security tpm-enroll --default system | grep -q '(not set)\|this machine'"'"'s default'
    [ ! -e "$XDG_CONFIG_HOME/keychain/tpm-enroll" ]
    security tpm-enroll --default maybe 2>/dev/null && return 1
    security tpm-enroll --default on login 2>/dev/null && return 1
    no_leftovers
}

# --- the SSH agent's keys inside the TPM (keychain-tpm-probe: KeychainTPMClient's TPMSigningKeys) ---

# tpm_key: a new key in the TPM of $KEYCHAIN_TPM_TCTI; sets point and blob (hex).
tpm_key() {
    local out
    out=$(keychain-tpm-probe create)
    read -r point blob <<< "$out"
    [[ $point =~ ^04[0-9a-f]{128}$ ]] || { echo "not a P-256 point: $point"; return 1; }
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# tpm_sign BLOB DIGEST: the key's signature of DIGEST (SHA-256, hex); sets r and s (hex).
tpm_sign() {
    local out
    out=$(keychain-tpm-probe sign "$1" "$2")
    read -r r s <<< "$out"
    [[ $r =~ ^[0-9a-f]{64}$ && $s =~ ^[0-9a-f]{64}$ ]] || { echo "not a P-256 signature: $out"; return 1; }
}

# openssl_verifies POINT R S FILE: OpenSSL's own check of the signature (r, s) of FILE by the
# key at POINT, through a PEM public key and a DER ECDSA-Sig-Value built here.
openssl_verifies() {
    python3 - "$1" "$2" "$3" "$case_dir" <<'PY'
import sys
point, r, s, out = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3]), sys.argv[4]
def integer(v):
    v = v.lstrip(b"\0") or b"\0"
    return b"\x02" + bytes([len(v) + (v[0] >> 7)]) + (b"\0" if v[0] & 0x80 else b"") + v
body = integer(r) + integer(s)
open(out + "/key.der", "wb").write(bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200") + point)
open(out + "/sig.der", "wb").write(b"\x30" + bytes([len(body)]) + body)
PY
    openssl pkey -pubin -inform DER -in "$case_dir/key.der" -out "$case_dir/key.pem" &&
        openssl dgst -sha256 -verify "$case_dir/key.pem" -signature "$case_dir/sig.der" "$4"
}

tpm_key_signs_and_openssl_verifies() {
    tpm_key
    printf 'a message to sign\n' > "$case_dir/message"
    tpm_sign "$blob" "$(sha256_of "$case_dir/message")"
    expect "Verified OK" "$(openssl_verifies "$point" "$r" "$s" "$case_dir/message")" "OpenSSL's verdict"
    # ECDSA's nonce: a second signature differs, and verifies too.
    first_r=$r
    tpm_sign "$blob" "$(sha256_of "$case_dir/message")"
    [ "$r" != "$first_r" ]
    expect "Verified OK" "$(openssl_verifies "$point" "$r" "$s" "$case_dir/message")" "the second signature"
    # Not a check that passes anything: another message, or another key's point, fails.
    printf 'another message\n' > "$case_dir/other"
    openssl_verifies "$point" "$r" "$s" "$case_dir/other" && return 1
    old_point=$point
    tpm_key
    [ "$point" != "$old_point" ]
    openssl_verifies "$point" "$r" "$s" "$case_dir/message" && return 1
    # Flushed after use: nothing stays loaded in a TPM without a resource manager.
    no_leftovers
}

# OpenSSH's own judgement: an SSH signature (sshsig.py, PROTOCOL.sshsig) around the TPM's (r, s).
tpm_key_signs_for_ssh_keygen() {
    tpm_key
    printf 'signed over SSH\n' > "$case_dir/message"
    tpm_sign "$blob" "$(python3 "$here/sshsig.py" digest file "$case_dir/message")"
    python3 "$here/sshsig.py" write "$point" "$r" "$s" file "$case_dir/ssh"
    ssh-keygen -l -f "$case_dir/ssh.pub" | grep -q '^256 SHA256:.* (ECDSA)$'
    echo "tpm@test $(cut -d' ' -f1,2 "$case_dir/ssh.pub")" > "$case_dir/allowed"
    out=$(ssh-keygen -Y verify -f "$case_dir/allowed" -I tpm@test -n file -s "$case_dir/ssh.sig" < "$case_dir/message" 2>&1)
    grep -q '^Good "file" signature for tpm@test with ECDSA key SHA256:' <<< "$out" || { echo "$out"; return 1; }
    # Another message, or another namespace: refused by the same check.
    printf 'changed\n' | ssh-keygen -Y verify -f "$case_dir/allowed" -I tpm@test -n file -s "$case_dir/ssh.sig" && return 1
    ssh-keygen -Y verify -f "$case_dir/allowed" -I tpm@test -n git -s "$case_dir/ssh.sig" < "$case_dir/message" && return 1
    no_leftovers
}

# The agent signs for several connections at once, in one process; swtpm has no resource
# manager, and two helpers' objects at once overflow its slots.
tpm_signatures_asked_at_once_are_all_made() {
    tpm_key
    printf 'data\n' > "$case_dir/message"
    out=$(keychain-tpm-probe sign "$blob" "$(sha256_of "$case_dir/message")" 8)
    expect 8 "$(grep -c '^[0-9a-f]\{64\} [0-9a-f]\{64\}$' <<< "$out")" "signatures made" || { echo "$out"; return 1; }
    while read -r r s; do openssl_verifies "$point" "$r" "$s" "$case_dir/message" >/dev/null; done <<< "$out"
    no_leftovers
}

tpm_key_of_another_tpm_cannot_sign() {
    tpm_key
    printf 'data\n' > "$case_dir/message"
    digest=$(sha256_of "$case_dir/message")
    status=0
    out=$(KEYCHAIN_TPM_TCTI=$second_tcti keychain-tpm-probe sign "$blob" "$digest" 2>&1) || status=$?
    expect 1 "$status" "signing on the second TPM"
    grep -q "^this key belongs to another TPM (or this TPM's owner hierarchy was cleared since): it does not load here (TPM_RC_" <<< "$out" || { echo "$out"; return 1; }
    # Its own TPM still signs with it.
    tpm_sign "$blob" "$(sha256_of "$case_dir/message")"
    # No TPM, or one that does not answer: said, not a hang.
    status=0
    out=$(KEYCHAIN_TPM_TCTI=none keychain-tpm-probe sign "$blob" "$digest" 2>&1) || status=$?
    expect "1 no TPM (\$KEYCHAIN_TPM_TCTI is none)" "$status $out" "without a TPM"
    status=0
    out=$(KEYCHAIN_TPM_TCTI=none keychain-tpm-probe create 2>&1) || status=$?
    expect "1 no TPM (\$KEYCHAIN_TPM_TCTI is none)" "$status $out" "creation without a TPM"
    closed=$(free_port)
    status=0
    out=$(KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$closed" keychain-tpm-probe create 2>&1) || status=$?
    expect 1 "$status" "creation with no TPM listening"
    grep -q "^no TPM reachable through swtpm:host=127.0.0.1,port=$closed\|^no TPM: tpm2-tss cannot talk to the TPM" <<< "$out" || { echo "$out"; return 1; }
    silent=$(free_port)
    timeout 60 python3 "$here/silent-tpm.py" "$silent" 50 &
    silent_pid=$!
    sleep 0.5
    started=$(date +%s%N)
    status=0
    out=$(KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$silent" KEYCHAIN_TPM_TIMEOUT=2 timeout 30 keychain-tpm-probe sign "$blob" "$digest" 2>&1) || status=$?
    took=$(( ($(date +%s%N) - started) / 1000000 ))
    kill $silent_pid
    echo "signing against a silent TPM: status $status after $took ms"
    expect "1 the TPM did not answer within 2 s (the most one command may wait for it, all its TPM operations together)" "$status $out"
    [ "$took" -lt 5000 ]
    no_leftovers
}

# Through a man in the middle that damages a third of the TPM's answers: every call ends in a
# verifying signature or key, or an error; never a signal, a hang, or a signature or point that
# does not verify.
lying_tpm_never_yields_a_bad_signature_or_key() {
    export KEYCHAIN_TPM_TCTI=$second_tcti
    tpm_key
    good_point=$point good_blob=$blob
    printf 'data\n' > "$case_dir/message"
    digest=$(sha256_of "$case_dir/message")
    liar=$(free_port)
    timeout 300 python3 "$here/lying-tpm.py" "$liar" "$second_port" 20261128 300 0.35 &
    liar_pid=$!
    sleep 0.5
    ok=0 refused=0
    for n in $(seq 1 30); do
        status=0
        if [ $((n % 3)) = 0 ]; then
            out=$(KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$liar" KEYCHAIN_TPM_TIMEOUT=3 timeout 20 keychain-tpm-probe create 2>&1) || status=$?
            # A key it answers signs on the real TPM, verified by the point it answered.
            [ $status = 0 ] && { read -r point blob <<< "$out"; tpm_sign "$blob" "$digest"; }
        else
            point=$good_point
            out=$(KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$liar" KEYCHAIN_TPM_TIMEOUT=3 timeout 20 keychain-tpm-probe sign "$good_blob" "$digest" 2>&1) || status=$?
            [ $status = 0 ] && read -r r s <<< "$out"
        fi
        case $status in
            0) openssl_verifies "$point" "$r" "$s" "$case_dir/message" >/dev/null || { echo "call $n: a signature that does not verify: $out"; kill $liar_pid; return 1; }
                ok=$((ok + 1)) ;;
            1) refused=$((refused + 1)) ;;
            *) echo "call $n: status $status: $out"; kill $liar_pid; return 1 ;;
        esac
        tpm "$second_tcti" tpm2_flushcontext -t >/dev/null 2>&1; tpm "$second_tcti" tpm2_flushcontext -l >/dev/null 2>&1
    done
    kill $liar_pid
    echo "through the lying TPM: $ok verified, $refused refused"
    [ "$refused" -gt 0 ] && [ "$ok" -gt 0 ]
    # Only TPM2_Sign's answers, each with one bit flipped: they still parse, and most carry an r
    # or s changed, which only a check by the point catches.
    timeout 300 python3 "$here/lying-tpm.py" "$liar" "$second_port" 20261128 300 1 0x15d &
    liar_pid=$!
    sleep 0.5
    refused=0
    for n in $(seq 1 12); do
        status=0
        out=$(KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$liar" timeout 20 keychain-tpm-probe sign "$good_blob" "$digest" 2>&1) || status=$?
        case $status in
            0) read -r r s <<< "$out"
                openssl_verifies "$good_point" "$r" "$s" "$case_dir/message" >/dev/null || { echo "flipped $n: a signature that does not verify: $out"; kill $liar_pid; return 1; } ;;
            1) refused=$((refused + 1)) ;;
            *) echo "flipped $n: status $status: $out"; kill $liar_pid; return 1 ;;
        esac
        tpm "$second_tcti" tpm2_flushcontext -t >/dev/null 2>&1
    done
    kill $liar_pid
    echo "one bit flipped in each TPM2_Sign answer: $refused of 12 refused"
    [ "$refused" -gt 0 ]
}

malformed_tpm_key_blobs_are_errors() {
    tpm_key
    printf 'data\n' > "$case_dir/message"
    digest=$(sha256_of "$case_dir/message")
    # The public area's length prefix, its attributes (the sign bit dropped, decrypt added) and
    # the whole blob cut, extended, emptied or replaced: refused before the TPM sees it.
    attributes=${blob:12:8}
    for bad in "${blob:0:${#blob}-2}" "${blob}00" "00" "$(head -c 200 /dev/urandom | xxd -p | tr -d '\n')" \
        "${blob:0:12}$(printf %08x $(( 0x$attributes ^ 0x00060000 )))${blob:20}" "ffff${blob:4}"; do
        status=0
        out=$(keychain-tpm-probe sign "$bad" "$digest" 2>&1) || status=$?
        expect "1 not a TPM signing key blob (damaged, or not one this program makes)" "$status $out" "blob ${bad:0:40}..."
    done
    # A private area changed inside (its last byte): the TPM's integrity check refuses it.
    last=${blob: -2}
    status=0
    out=$(keychain-tpm-probe sign "${blob:0:${#blob}-2}$(printf %02x $(( 0x$last ^ 1 )))" "$digest" 2>&1) || status=$?
    expect 1 "$status" "a changed private area"
    grep -q "does not load here (TPM_RC_" <<< "$out" || { echo "$out"; return 1; }
    # The digest: SHA-256's 32 bytes exactly.
    status=0
    out=$(keychain-tpm-probe sign "$blob" "${digest:2}" 2>&1) || status=$?
    expect "1 a SHA-256 digest is 32 bytes, not 31" "$status $out" "a short digest"
    no_leftovers
}

check "enrol: a recovery key printed once, every item still there" enrol_prints_a_recovery_key
if [ "$(id -u)" = 0 ]; then
    check "with a broker: a sealed keychain stays in the kernel keyring and works; tpm-enroll of a kept one: errSecUnimplemented" sealed_keychain_stays_in_kernel_with_a_broker
else
    skip "the broker case makes a system user, and needs root"
fi
check "the right password unlocks through the TPM" right_password_unlocks
check "a wrong password is counted by the TPM" wrong_password_is_counted_by_the_tpm
check "past the lockout threshold every password is refused, the right one too" lockout_refuses_even_the_right_password
check "a copy on another TPM: not the password, the recovery key; re-sealed there" copy_on_another_tpm_needs_the_recovery_key
check "ThisDeviceOnly items go with the TPM, the others stay" device_only_items_go_with_the_tpm
check "password change and key rotation keep the binding" password_change_and_rotation_keep_the_binding
check "removing the binding: the password alone opens it, nothing lost" removing_the_binding
check "no TPM reachable: today's behaviour, said once in status" no_tpm_is_todays_behaviour
check "a sealed keychain without its TPM points to the recovery key" sealed_keychain_without_its_tpm
check "a TPM that answers wrongly gives errors, never a crash, a hang or a key" lying_tpm_gives_errors
check "an older copy put back is noticed by the TPM's counter; writes do not wear it" an_older_copy_put_back_is_noticed
check "a counter another user undefined and squatted: --accept-older-copy still opens it" counter_taken_by_another_user_is_no_lockout
check "an older copy put back, its counter row deleted and its TPM counter undefined: refused" older_copy_without_record_or_counter_is_refused
check "unlocks at the same moment move the counter, never read as an older copy" parallel_unlocks_are_no_older_copy
check "a PCR binding: another boot chain refused, uncounted; the recovery key opens it; re-enrol binds again" pcr_binding_refuses_another_boot_chain
check "another user of the TPM cannot undefine the counter (platform, policy delete); owner counters still work" counter_is_out_of_other_users_reach
check "a PCR extended after boot is told apart from a changed boot chain; the recovery key opens it" pcr_extended_after_boot_is_told_apart
check "a TPM that never answers: create-keychain --tpm and an unlock give up within one limit" a_silent_tpm_bounds_the_whole_command
check "create-keychain --tpm: sealed at once, its recovery key printed, wrong passwords counted" create_with_tpm_seals_at_once
check "create-keychain --tpm without a TPM: fails as tpm-enroll does, creates nothing" create_with_tpm_and_no_tpm_creates_nothing
check "tpm-enroll --default on: new keychains sealed; --no-tpm, no TPM, off and system" default_on_seals_new_keychains
check "a TPM signing key: made in the TPM, its signatures verified by OpenSSL, flushed after use" tpm_key_signs_and_openssl_verifies
if command -v ssh-keygen >/dev/null; then
    check "a TPM signing key signs for OpenSSH: ssh-keygen -Y verify accepts it" tpm_key_signs_for_ssh_keygen
else
    skip "ssh-keygen is missing (apt-get install openssh-client)"
fi
check "TPM signatures asked for at once by one process (the agent's connections): all made" tpm_signatures_asked_at_once_are_all_made
check "a TPM signing key on another TPM: refused, named; no TPM and a silent one said, not a hang" tpm_key_of_another_tpm_cannot_sign
check "a TPM that answers wrongly: TPM keys sign and verify, or fail; never a bad signature or point" lying_tpm_never_yields_a_bad_signature_or_key
check "a damaged or edited TPM key blob, a short digest: clear errors, never a crash" malformed_tpm_key_blobs_are_errors

summary
