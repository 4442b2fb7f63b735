#!/usr/bin/env bash
# pam_keychain.so under real PAM: pamtester as root with a throwaway user and pam_unix, and
# cwrap's pam_wrapper (pam_matrix + pam_set_items) run as that unprivileged user. Every case makes
# and removes its own user, its own /etc/pam.d service file and the user's kernel keys; the
# machine's own PAM stack is never touched.
set -uo pipefail
# In a mount namespace of its own (as root): the broker cases bind their broker's folder over
# /run/keychain-broker, where the module finds the system's broker, and no other process on this
# machine may see it there.
if [ "$(id -u)" = 0 ] && [ -z "${KC_PAM_NAMESPACE:-}" ] && unshare -m --propagation private true 2>/dev/null; then
    exec env KC_PAM_NAMESPACE=1 unshare -m --propagation private bash "$0" "$@"
fi
bin=$(realpath "${1:-.build/debug}")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
# shellcheck source=Tests/broker-lib.sh
. "$here/../broker-lib.sh"
module=$bin/libpam_keychain.so
wrapper_lib=$(ls /usr/lib/*/libpam_wrapper.so 2>/dev/null | head -1)
wrapper_modules=$(dirname "${wrapper_lib:-/x}")/pam_wrapper

if [ "$(id -u)" != 0 ]; then
    skip "the PAM suite makes users and /etc/pam.d files, and needs root"
    summary
    exit 0
fi

devlog='' devlog_pid='' stage='' broker_made_dir=''
cleanup() {
    stop_broker
    [ -z "$devlog_pid" ] || kill "$devlog_pid" 2>/dev/null
    [ -z "$devlog" ] || rm -f "$devlog"
    [ -z "$stage" ] || rm -rf "$stage"
}
trap cleanup EXIT

# The throwaway users run `security` and pam_wrapper loads the module in their processes, and
# they may not be able to reach the checkout (a clone under /root is 0700): they get copies in a
# folder anyone can read, and every command starts from /, not from a folder they cannot enter.
# Under /run, not /tmp: the broker identifies only a program no user can replace (KeychainPeers'
# FileTrust), as an installed `security` is.
stage=$(mktemp -d /run/pam-bin-XXXXXX)
cp "$bin/security" "$bin/libpam_keychain.so" "$bin/keychain-broker" "$stage/"
chmod 755 "$stage" "$stage/security" "$stage/libpam_keychain.so" "$stage/keychain-broker"
bin=$stage
module=$bin/libpam_keychain.so
cd /

# Our own /dev/log when the machine has no syslog, so the module's lines can be read.
if [ ! -e /dev/log ]; then
    devlog=$(mktemp /tmp/pam-devlog-XXXXXX)
    python3 "$here/devlog.py" "$devlog" 900 &
    devlog_pid=$!
    for _ in $(seq 50); do [ -S /dev/log ] && break; sleep 0.1; done
fi

password='Login-pass-1'

# A service file: $1 = auth/session option line suffix, $2 = control for our module.
write_service() {
    local control=${2:-optional} extra=${1:-}
    cat > "/etc/pam.d/$service" <<PAM
auth     required  pam_unix.so
auth     $control  $module debug $extra
account  required  pam_unix.so
password required  pam_unix.so yescrypt
password $control  $module debug $extra
session  required  pam_unix.so
session  $control  $module debug auto_create lock_on_close $extra
PAM
}

fresh() {
    case_dir=$(mktemp -d /tmp/pam-case-XXXXXX)
    chmod 755 "$case_dir"
    user=kct$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
    service=keychain-test-$user
    useradd -m -s /bin/sh "$user"
    echo "$user:$password" | chpasswd
    uid=$(id -u "$user") gid=$(id -g "$user") home=$(getent passwd "$user" | cut -d: -f6)
    keychain=$home/.local/share/keychains/login.keychain-db
    write_service
    [ -n "$devlog" ] && : > "$devlog"
}

finish() {
    as_user keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1
    mountpoint -q "$home" 2>/dev/null && umount "$home"
    userdel -r "$user" >/dev/null 2>&1
    rm -rf "$home" "/etc/pam.d/$service" "$case_dir"
}

# Runs a command as the user, as a process of theirs would run (setpriv opens no PAM session).
as_user() {
    setpriv --reuid="$uid" --regid="$gid" --init-groups env -i HOME="$home" PATH="$bin:/usr/bin:/bin" "$@"
}

login() { printf '%s\n' "${1:-$password}" | pamtester "$service" "$user" authenticate open_session >/dev/null; }
logout() { pamtester "$service" "$user" close_session >/dev/null; }
state() { as_user security status 2>/dev/null | awk -v c="$1:" '$1 == c { print $2 }'; }
# The module's line reaches devlog.py as a datagram and is written by that process: on a busy
# machine it may land a moment after the PAM call returns, so wait for it (up to 5 s).
logged() {
    [ -z "$devlog" ] && return 0
    for _ in $(seq 50); do grep -q "$1" "$devlog" && return 0; sleep 0.1; done
    echo "not logged: $1"
    return 1
}
digest() { sha256sum "$1" | cut -d' ' -f1; }
# Fails when the command succeeds (`! cmd` never fails a case: set -e ignores it).
refute() { if "$@"; then echo "unexpectedly true: $*"; return 1; fi; }

# keychain-broker as the system runs it (Tests/broker-lib.sh: its own system user, setpriv with
# only CAP_SYS_PTRACE), its socket folder bound at /run/keychain-broker/socket (in this
# suite's mount namespace only), where the module, run by pamtester as root with nothing in its
# environment to name one, finds it, and the user's `security` too. `security` here (the stage's
# copy) is the broker's own program, so items it makes (apple-tool:) are read without a question.
start_broker() {
    [ -n "${KC_PAM_NAMESPACE:-}" ] || { [ ! -e /run/keychain-broker/socket ] || return 1; }
    broker_setup "kcpb$$" pam-broker || return 1
    broker_copy "$stage" keychain-broker || return 1
    if [ ! -d /run/keychain-broker ]; then mkdir /run/keychain-broker && broker_made_dir=1; fi
    mount --bind "$broker_dir/run" /run/keychain-broker || return 1
    broker_socket=/run/keychain-broker/socket
    broker_start --own-program "$stage/security"
}

stop_broker() {
    broker_stop
    if [ -n "$broker_dir" ]; then
        umount /run/keychain-broker 2>/dev/null
        [ -z "$broker_made_dir" ] || rmdir /run/keychain-broker 2>/dev/null
    fi
    broker_teardown
}

# --- flows with pamtester and pam_unix -----------------------------------------------------

first_login_creates_and_unlocks() {
    [ ! -e "$keychain" ]
    login
    [ -f "$keychain" ]
    expect "$user 600" "$(stat -c '%U %a' "$keychain")"
    expect unlocked "$(state WhenUnlocked)"
    expect unlocked "$(state AfterFirstUnlock)"
    logged "open_session: created and unlocked the login keychain of $user"
}

# sessions_counted CUSTODY (kernel | broker): two sessions open; closing one locks nothing, the
# last locks WhenUnlocked only, and the next login unlocks it again. In the broker's custody the
# module says so at each step and no class key reaches the kernel keyring.
sessions_counted() {
    local custody=$1
    login
    as_user security add-generic-password -a wu -s s -w wu-secret
    as_user security add-generic-password -a afu -s s --accessibility afterFirstUnlock -w afu-secret
    login
    logout
    expect unlocked "$(state WhenUnlocked)" "one session still open"
    logout
    [ "$custody" = kernel ] || logged "close_session: the last session of $user ended"
    expect locked "$(state WhenUnlocked)" "the last session locks WhenUnlocked ($custody)"
    expect unlocked "$(state AfterFirstUnlock)" "AfterFirstUnlock stays until reboot"
    expect 36 "$(status_of as_user security find-generic-password -a wu -w)"
    expect afu-secret "$(as_user security find-generic-password -a afu -w)"
    login
    if [ "$custody" = broker ]; then
        logged "open_session: unlocked the login keychain of $user"
        expect unlocked "$(state WhenUnlocked)"
        kept_by_broker
        no_class_key_in_kernel
    fi
    expect wu-secret "$(as_user security find-generic-password -a wu -w)"
}

sessions_are_counted() { sessions_counted kernel; }

# Without `debug`, each event still leaves one line (as gnome-keyring's module does), and none
# holds the password.
events_are_logged_without_debug() {
    [ -n "$devlog" ] || { echo "the machine's syslog has the lines; this case reads its own /dev/log"; return 0; }
    sed -i 's/ debug / /' "/etc/pam.d/$service"
    refute grep -q debug "/etc/pam.d/$service"
    login
    logged "open_session: created and unlocked the login keychain of $user"
    logout
    logged "close_session: the last session of $user ended; the login keychain's WhenUnlocked items are locked"
    login
    logged "open_session: unlocked the login keychain of $user"
    printf '%s\n%s\n%s\n' "$password" 'New-pass-3-xyz' 'New-pass-3-xyz' |
        setpriv --ruid="$uid" --regid="$gid" --init-groups --euid=0 pamtester "$service" "$user" chauthtok >/dev/null
    logged "chauthtok: the login keychain of $user is re-keyed to the new password"
    expect 1 "$(grep -c 'open_session: created' "$devlog")" "one line for the creation"
    refute grep -q -e "$password" -e 'New-pass-3-xyz' "$devlog"
}

change_password_rekeys() {
    login
    as_user security add-generic-password -a a -s s -w kept
    printf '%s\n%s\n%s\n' "$password" 'New-pass-2-xyz' 'New-pass-2-xyz' |
        setpriv --ruid="$uid" --regid="$gid" --init-groups --euid=0 pamtester "$service" "$user" chauthtok >/dev/null
    as_user security lock-keychain
    expect 51 "$(printf '%s\n' "$password" | status_of as_user security unlock-keychain)" "the old password no longer opens it"
    printf 'New-pass-2-xyz\n' | as_user security unlock-keychain
    expect kept "$(as_user security find-generic-password -a a -w)"
    logout
    login 'New-pass-2-xyz'
    expect unlocked "$(state WhenUnlocked)" "the new login password unlocks at login"
}

root_reset_then_unlock_rekeys() {
    login
    logout
    # root sets a new password: no old token, so the keybag keeps the old one, and root leaves
    # the new one in the user's kernel keyring in a key root owns.
    printf 'Reset-pass-3-xyz\nReset-pass-3-xyz\n' | pamtester "$service" "$user" chauthtok >/dev/null
    logged 'a reset by root'
    grep -q '^user;0;[0-9]*;[0-9a-f]*;keychain:[0-9a-f]*:login-reset$' <<< "$(kernel_keys)"
    as_user security lock-keychain
    login 'Reset-pass-3-xyz'
    expect locked "$(state WhenUnlocked)" "the new login password does not open the old keybag"
    logged 'since root reset it'
    out=$(printf '%s\n' "$password" | as_user security unlock-keychain 2>&1)
    echo "$out"
    [[ "$out" == "security: the login password was reset by root at 20"*" UTC; this keychain is re-keyed from its current password to it" ]]
    refute grep -q ':login-reset$' <<< "$(kernel_keys)"
    as_user security lock-keychain
    expect 51 "$(printf '%s\n' "$password" | status_of as_user security unlock-keychain)" "the old password no longer opens it"
    printf 'Reset-pass-3-xyz\n' | as_user security unlock-keychain
    expect unlocked "$(state WhenUnlocked)"
}

reset_then_user_changes_it() {
    login
    logout
    printf 'Reset-pass-3-xyz\nReset-pass-3-xyz\n' | pamtester "$service" "$user" chauthtok >/dev/null
    # The user changes the password root set (as `chage -d 0` makes them at the next login)
    # before the keychain followed it: the reset moves on to the user's new password.
    printf '%s\n%s\n%s\n' 'Reset-pass-3-xyz' 'Mine-pass-7-xyz' 'Mine-pass-7-xyz' |
        setpriv --ruid="$uid" --regid="$gid" --init-groups --euid=0 pamtester "$service" "$user" chauthtok >/dev/null
    logged "before the login keychain followed it"
    grep -q '^user;0;[0-9]*;[0-9a-f]*;keychain:[0-9a-f]*:login-reset$' <<< "$(kernel_keys)" ||
        { echo "no root-owned reset key: $(kernel_keys)"; return 1; }
    as_user security lock-keychain
    out=$(printf '%s\n' "$password" | as_user security unlock-keychain 2>&1)
    [[ "$out" == *"re-keyed from its current password to it" ]] || { echo "unlock-keychain said: $out"; return 1; }
    as_user security lock-keychain
    expect 51 "$(printf 'Reset-pass-3-xyz\n' | status_of as_user security unlock-keychain)" "not the password root set"
    printf 'Mine-pass-7-xyz\n' | as_user security unlock-keychain
}

screen_unlock() {
    login
    as_user security lock-keychain
    expect locked "$(state WhenUnlocked)"
    # A screen locker authenticates and refreshes credentials; the user has a session, so the
    # keychain opens at once, without a new session.
    printf '%s\n' "$password" | pamtester "$service" "$user" authenticate 'setcred(PAM_REFRESH_CRED)' >/dev/null
    expect unlocked "$(state WhenUnlocked)"
    # Authentication alone unlocks nothing: the stash is only trusted once the stack succeeded.
    as_user security lock-keychain
    printf '%s\n' "$password" | pamtester "$service" "$user" authenticate >/dev/null
    expect locked "$(state WhenUnlocked)"
}

rejected_password_is_not_trusted() {
    # The keychain's password is not the login password, and pam_unix is `required`, so PAM still
    # runs this module after pam_unix rejects what was typed. A session is open, as when a
    # screen locker asks.
    login
    as_user security set-keychain-password -o "$password" -p 'Keychain-only-9'
    as_user security lock-keychain
    refute pamtester "$service" "$user" authenticate 'setcred(PAM_REFRESH_CRED)' open_session <<< 'Keychain-only-9' >/dev/null 2>&1
    expect locked "$(state WhenUnlocked)" "a password pam_unix rejected never unlocks the keychain"
}

only_if_other_service() {
    write_service "only_if=sshd,gdm-password"
    login
    [ ! -e "$keychain" ]
}

# --- failures never block a login ----------------------------------------------------------

required_everywhere() { write_service "" required; }

no_password_sso() {
    required_everywhere
    pamtester "$service" "$user" open_session close_session >/dev/null
    [ ! -e "$keychain" ] || return 1
}

wrong_keychain_password() {
    required_everywhere
    printf 'other password\n' | as_user security create-keychain
    as_user security lock-keychain
    before=$(digest "$keychain")
    login
    expect locked "$(state WhenUnlocked)"
    expect "$before" "$(digest "$keychain")"
    logout
}

corrupt_keybag() {
    required_everywhere
    login
    as_user security lock-keychain
    as_user sqlite3 "$keychain" "update keychain set value = x'00' where name = 'wrap.A'"
    before=$(digest "$keychain")
    login
    logout
    printf '%s\n%s\n%s\n' "$password" 'New-pass-2-xyz' 'New-pass-2-xyz' |
        setpriv --ruid="$uid" --regid="$gid" --init-groups --euid=0 pamtester "$service" "$user" chauthtok >/dev/null
    expect "$before" "$(digest "$keychain")" "the damaged keychain is left as it was"
    logged 'failed'
}

missing_home() {
    required_everywhere
    rm -rf "$home"
    login
    logout
    [ ! -e "$home" ]
}

full_disk() {
    required_everywhere
    rm -rf "$home"
    mkdir -p "$home"
    mount -t tmpfs -o size=256k,mode=0755 tmpfs "$home"
    chown "$uid:$gid" "$home"
    as_user sh -c 'head -c 300000 /dev/zero > "$HOME/fill" 2>/dev/null; true'
    login
    logout
    [ ! -s "$keychain" ] || [ "$(as_user security status >/dev/null 2>&1; echo $?)" != 0 ]
}

keychain_of_another_user() {
    required_everywhere
    login
    logout
    chown root:root "$keychain"
    before=$(digest "$keychain")
    login
    logout
    expect "$before" "$(digest "$keychain")"
    expect root "$(stat -c %U "$keychain")"
}

toolchain_hidden() {
    # The module needs nothing from /opt/swift at run time.
    refute grep -qi swift <<< "$(ldd "$module")"
    unshare -m sh -c "mount -t tmpfs none /opt/swift && printf '%s\n' '$password' | pamtester '$service' '$user' authenticate open_session" >/dev/null
    expect unlocked "$(state WhenUnlocked)"
}

exports_only_pam_entry_points() {
    expect "pam_sm_authenticate pam_sm_chauthtok pam_sm_close_session pam_sm_open_session pam_sm_setcred" \
        "$(nm -D --defined-only "$module" | awk '$2 ~ /^[A-Z]$/ { print $3 }' | sort | tr '\n' ' ' | sed 's/ $//')"
    readelf -d "$module" | grep -q NODELETE
}

# --- the same flows under pam_wrapper, without root ----------------------------------------

wrapper_flows() {
    [ -n "$wrapper_lib" ] || { echo "libpam-wrapper is not installed"; return 1; }
    dir=$case_dir/pamd
    mkdir -p "$dir"
    echo "$user:$password:keychain" > "$case_dir/passdb"
    chmod 644 "$case_dir/passdb"
    cat > "$dir/keychain" <<PAM
auth     required  $wrapper_modules/pam_matrix.so passdb=$case_dir/passdb
auth     required  $wrapper_modules/pam_set_items.so
auth     optional  $module debug
account  required  $wrapper_modules/pam_matrix.so passdb=$case_dir/passdb
password required  $wrapper_modules/pam_set_items.so
password optional  $module debug
session  optional  $wrapper_modules/pam_matrix.so passdb=$case_dir/passdb
session  optional  $module debug auto_create lock_on_close
PAM
    chmod -R a+rX "$dir"
    # pam_matrix's close_session deletes the HOMEDIR its open_session set, which a second pamtester
    # process does not have (PAM_BAD_ITEM): it is optional in the session stack for that reason.
    wrapped() {
        setpriv --reuid="$uid" --regid="$gid" --init-groups env -i HOME="$home" PATH="$bin:/usr/bin:/bin" \
            LD_PRELOAD="$wrapper_lib" PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$dir" "$@"
    }
    printf '%s\n' "$password" | wrapped PAM_AUTHTOK="$password" pamtester keychain "$user" authenticate open_session >/dev/null
    expect unlocked "$(state WhenUnlocked)" "created and unlocked without root"
    as_user security add-generic-password -a afu -s s --accessibility afterFirstUnlock -w afu-secret
    printf '%s\n' "$password" | wrapped PAM_AUTHTOK="$password" pamtester keychain "$user" authenticate open_session >/dev/null
    wrapped pamtester keychain "$user" close_session >/dev/null
    expect unlocked "$(state WhenUnlocked)"
    wrapped pamtester keychain "$user" close_session >/dev/null
    expect locked "$(state WhenUnlocked)"
    expect afu-secret "$(as_user security find-generic-password -a afu -w)"
    wrapped PAM_OLDAUTHTOK="$password" PAM_AUTHTOK='Wrapped-new-4' pamtester keychain "$user" chauthtok >/dev/null
    expect 51 "$(printf '%s\n' "$password" | status_of as_user security unlock-keychain)"
    printf 'Wrapped-new-4\n' | as_user security unlock-keychain
    expect unlocked "$(state WhenUnlocked)"
}

# "type;uid;gid;perm;description" of every key in the user's persistent keyring.
kernel_keys() {
    as_user keyctl session - sh -c 'r=$(keyctl get_persistent @s); for k in $(keyctl rlist "$r"); do keyctl rdescribe "$k"; echo; done' 2>/dev/null
}

planted_reset_is_ignored() {
    login
    id=$(sed -n 's/^user;.*;keychain:\([0-9a-f]*\):A$/\1/p' <<< "$(kernel_keys)")
    [ -n "$id" ]
    # A process of the user's plants a "reset" with a password of its choosing, in the format
    # root uses and in the one this module used before.
    as_user keyctl session - sh -c "r=\$(keyctl get_persistent @s)
        printf 'keychain-login-reset 1\n%s\n%s\nPlanted-pass-6' \$(date +%s) $id | keyctl padd user keychain:$id:login-reset \$r
        printf 'Planted-pass-6' | keyctl padd user keychain:$id:login \$r" >/dev/null 2>&1
    grep -q "^user;$uid;.*:login-reset$" <<< "$(kernel_keys)"
    as_user security lock-keychain
    out=$(printf '%s\n' "$password" | as_user security unlock-keychain 2>&1)
    expect "" "$out" "unlock-keychain says nothing and re-keys nothing"
    as_user security lock-keychain
    expect 51 "$(printf 'Planted-pass-6\n' | status_of as_user security unlock-keychain)" "the planted password does not open it"
    printf '%s\n' "$password" | as_user security unlock-keychain
}

# Root leaves a reset record by hand: $1 = the keychain named in the payload, $2 = its time.
root_leaves_reset() {
    keyctl session - sh -c '
        ring=$(keyctl get_persistent @s "$1")
        printf "keychain-login-reset 1\n%s\n%s\n%s" "$3" "$4" "$5" | keyctl padd user "keychain:$2:login-reset" "$ring"' \
        sh "$uid" "$id" "$2" "$1" 'Root-set-8-xyz' >/dev/null 2>&1
}

stale_or_foreign_reset_is_ignored() {
    login
    id=$(sed -n 's/^user;.*;keychain:\([0-9a-f]*\):A$/\1/p' <<< "$(kernel_keys)")
    [ -n "$id" ]
    as_user security lock-keychain
    # Owned by root, but two days old: ignored.
    root_leaves_reset "$id" $(( $(date +%s) - 172800 ))
    grep -q "^user;0;.*:login-reset$" <<< "$(kernel_keys)"
    expect "" "$(printf '%s\n' "$password" | as_user security unlock-keychain 2>&1)" "a stale reset is ignored"
    as_user security lock-keychain
    # Owned by root and fresh, but naming another keychain: ignored.
    root_leaves_reset 00112233445566778899aabbccddeeff "$(date +%s)"
    expect "" "$(printf '%s\n' "$password" | as_user security unlock-keychain 2>&1)" "a reset for another keychain is ignored"
    as_user security lock-keychain
    # The same by root, fresh and naming this keychain, is taken: the checks above were the difference.
    root_leaves_reset "$id" "$(date +%s)"
    [[ "$(printf '%s\n' "$password" | as_user security unlock-keychain 2>&1)" == *"re-keyed from its current password to it" ]]
    as_user security lock-keychain
    printf 'Root-set-8-xyz\n' | as_user security unlock-keychain
}

login_with_other_password_does_not_rekey() {
    login
    as_user security set-keychain-password -o "$password" -p 'Keychain-only-9'
    as_user security lock-keychain
    logout
    login
    expect locked "$(state WhenUnlocked)"
    logged 'does not open the login keychain'
    refute grep -qF "$password" <(as_user keyctl session - sh -c 'r=$(keyctl get_persistent @s); for k in $(keyctl rlist "$r"); do keyctl pipe "$k"; echo; done' 2>/dev/null)
    out=$(printf 'Keychain-only-9\n' | as_user security unlock-keychain 2>&1)
    expect "" "$out"
    as_user security lock-keychain
    expect 51 "$(printf '%s\n' "$password" | status_of as_user security unlock-keychain)" "still not the login password"
    printf 'Keychain-only-9\n' | as_user security unlock-keychain
}

# pam-auth-update with this profile, in a mount namespace of its own over copies of /etc/pam.d,
# /usr/share/pam-configs and /var/lib/pam: the machine's own files are never touched.
profile_is_interactive_only() {
    unshare -m --propagation private bash -c '
        set -e
        for d in /etc/pam.d /usr/share/pam-configs /var/lib/pam; do
            mkdir -p "$d"
            copy=$(mktemp -d)
            cp -a "$d/." "$copy/"
            mount -t tmpfs none "$d"
            cp -a "$copy/." "$d/"
            rm -rf "$copy"
        done
        install -m 0644 "$1" /usr/share/pam-configs/keychain
        pam-auth-update --package --enable keychain
        cat /etc/pam.d/common-session > "$2/interactive"
        cat /etc/pam.d/common-session-noninteractive > "$2/noninteractive"
    ' - "$here/../../pam/pam-configs-keychain" "$case_dir"
    grep -q 'pam_keychain.so auto_create lock_on_close' "$case_dir/interactive"
    refute grep -q pam_keychain "$case_dir/noninteractive"
}

# --- another user, sudo's order of calls, the worker's inheritance ---------------------------

# The suite's PAM application (pam-app.c), built for the case.
pam_app() {
    [ -x "$case_dir/pam-app" ] || gcc -Wall -Werror -rdynamic -o "$case_dir/pam-app" "$here/pam-app.c" -lpam -ldl
    "$case_dir/pam-app" "$@"
}

# A second user, $other, with password $1; removed with its keys when the case ends.
second_user() {
    other=kct$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
    useradd -m -s /bin/sh "$other"
    echo "$other:$1" | chpasswd
    other_uid=$(id -u "$other") other_gid=$(id -g "$other") other_home=$(getent passwd "$other" | cut -d: -f6)
    other_keychain=$other_home/.local/share/keychains/login.keychain-db
    trap 'as_other keyctl session - sh -c '\''keyctl clear "$(keyctl get_persistent @s)"'\'' >/dev/null 2>&1; userdel -r "$other" >/dev/null 2>&1; rm -rf "$other_home"' EXIT
}

as_other() {
    setpriv --reuid="$other_uid" --regid="$other_gid" --init-groups env -i HOME="$other_home" PATH="$bin:/usr/bin:/bin" "$@"
}

# Every payload in the second user's persistent keyring, one per line.
other_kernel_payloads() {
    as_other keyctl session - sh -c 'r=$(keyctl get_persistent @s); for k in $(keyctl rlist "$r"); do keyctl pipe "$k" 2>/dev/null; echo; done'
}

sudo_to_another_user_without_keychain() {
    second_user 'Bob-pass-5-xyz'
    # alice (the case's user) types her password; the session is opened for bob, as `sudo -u bob`.
    printf '%s\n' "$password" | pam_app "$service" "$user" --as "$other"
    [ ! -e "$other_keychain" ] || { echo "bob's keychain was created with alice's password"; return 1; }
    refute grep -qF "$password" <(other_kernel_payloads)
    logged 'typed for another user'
    # The same calls without the change of user still unlock alice's own keychain.
    printf '%s\n' "$password" | pam_app "$service" "$user"
    expect unlocked "$(state WhenUnlocked)"
}

sudo_to_another_user_with_keychain() {
    second_user 'Bob-pass-5-xyz'
    printf 'Bob-pass-5-xyz\n' | as_other security create-keychain
    as_other security lock-keychain
    before=$(digest "$other_keychain")
    printf '%s\n' "$password" | pam_app "$service" "$user" --as "$other"
    refute grep -qF "$password" <(other_kernel_payloads)
    expect "$before" "$(digest "$other_keychain")"
    # bob's next unlock keeps bob's password.
    printf 'Bob-pass-5-xyz\n' | as_other security unlock-keychain
    as_other security lock-keychain
    printf 'Bob-pass-5-xyz\n' | as_other security unlock-keychain
}

worker_inherits_no_descriptor_or_environment() {
    printf '%s\n' "$password" | KEYCHAIN_TEST_SECRET=from-the-application pam_app "$service" "$user" --hold /etc/shadow 2> "$case_dir/worker"
    grep -q '^worker-observed' "$case_dir/worker"
    expect unlocked "$(state WhenUnlocked)" "the worker still did its work"
    refute grep -q '^worker-fd .* /etc/shadow$' "$case_dir/worker"
    refute grep -q '^worker-env KEYCHAIN_TEST_SECRET' "$case_dir/worker"
    # Nothing beyond stdin, stdout, stderr and the worker's own reply pipe.
    expect "" "$(awk '$1 == "worker-fd" && $2 > 2 && $3 != "this-listing" && !($2 == 3 && $3 ~ /^pipe:/)' "$case_dir/worker")"
}

# The workers a login starts, counted by pam-app's initgroups: setcred's and open_session's,
# and a third, the import's, only while a login.keyring is there and no record of its import.
workers_of_a_login() {
    printf '%s\n' "${1:-$password}" | pam_app "$service" "$user" 2> "$case_dir/workers"
    grep -c '^worker-observed' "$case_dir/workers"
}

import_worker_only_when_pending() {
    expect 2 "$(workers_of_a_login)" "no login.keyring: no import worker"
    expect unlocked "$(state WhenUnlocked)"
    as_user mkdir -p "$home/.local/share/keyrings"
    as_user sh -c 'printf "not a keyring" > "$HOME/.local/share/keyrings/login.keyring"'
    expect 3 "$(workers_of_a_login)" "a login.keyring not yet imported: the import's worker too"
    logged "gnome-keyring's login keyring was not imported"
    [ ! -e "$home/.local/share/keychains/.login-keyring-imported" ]
    expect 2 "$(workers_of_a_login)" "the attempt on this file recorded: not tried again"
    grep -q '^ended at .*: failed ' "$home/.local/share/keychains/.login-keyring-tried"
    as_user sh -c 'printf "still not a keyring" > "$HOME/.local/share/keyrings/login.keyring"'
    expect 3 "$(workers_of_a_login)" "a changed file: tried again"
    expect 2 "$(workers_of_a_login)" "once"
    as_user touch "$home/.local/share/keychains/.login-keyring-imported"
    expect 2 "$(workers_of_a_login)" "imported once: no import worker"
    expect unlocked "$(state WhenUnlocked)"
}

# A login.keyring whose items cannot all come within the import's time limit: 120,000 items
# with no label and no attributes (look-alikes all, the most a file under the 8 MiB cap holds).
# The import ran into the limit at every login; now the attempt is recorded against the file,
# so only the first login pays it, and a changed file is tried again, once.
hostile_keyring_costs_one_login() {
    local tried=$home/.local/share/keychains/.login-keyring-tried keyring=$home/.local/share/keyrings/login.keyring
    local started took before
    as_user mkdir -p "$home/.local/share/keyrings"
    /usr/bin/python3 "$here/../stress/keyring_file.py" "$case_dir/login.keyring" 120000 "$password" --bare
    install -o "$uid" -g "$gid" -m 600 "$case_dir/login.keyring" "$keyring"
    started=$(date +%s%N)
    login
    took=$(( ($(date +%s%N) - started) / 1000000 ))
    echo "first login: $took ms"
    [ "$took" -ge 9000 ] || { echo "the import did not run into its time limit"; return 1; }
    logged "gave up after 10 s)"
    before=$(cat "$tried" 2>/dev/null || :)
    logout
    [ -n "$devlog" ] && : > "$devlog"
    started=$(date +%s%N)
    login
    took=$(( ($(date +%s%N) - started) / 1000000 ))
    echo "second login: $took ms"
    [ "$took" -lt 5000 ]
    logged "open_session: unlocked the login keychain of $user"
    refute grep -q 'login keyring' "${devlog:-/dev/null}"
    expect "$before" "$(cat "$tried")" "the record, untouched by the second login"
    expect "$uid 600" "$(stat -c '%u %a' "$tried")" "the record, the user's"
    expect "keyring $(stat -c '%d %i %s' "$keyring")" "$(head -1 "$tried" | cut -d' ' -f1-4)" "the file it names"
    grep -q '^begun at .*; did not end within 10 s$' "$tried"
    [ ! -e "$home/.local/share/keychains/.login-keyring-imported" ]
    logout
    # Another file (gnome-keyring rewrote it): tried again, and done. Its items are the first
    # three of the other, which came before the time limit and stayed.
    /usr/bin/python3 "$here/../stress/keyring_file.py" "$case_dir/login.keyring" 3 "$password" --bare
    install -o "$uid" -g "$gid" -m 600 "$case_dir/login.keyring" "$keyring"
    login
    logged 'login keyring imported into the login keychain: 0 added, 3 already there; done once'
    [ -f "$home/.local/share/keychains/.login-keyring-imported" ]
    [ ! -e "$tried" ]
}

# A login.keyring folder that never answers (the user's own FUSE mount, a network home gone
# quiet): the check for it is killed with the worker at its time limit, after the unlock was
# done and reported; the login goes on.
hung_keyrings_folder_costs_only_the_import() {
    login
    logout
    as_user mkdir -p "$home/.local/share/keyrings"
    python3 "$here/hung-fuse.py" "$home/.local/share/keyrings" 120 > "$case_dir/fuse" 2>&1 &
    fuse_pid=$!
    # The case runs in a subshell of its own: this ends the mount however the case ends.
    trap 'kill "$fuse_pid" 2>/dev/null || :; wait "$fuse_pid" 2>/dev/null || :; umount -l "$home/.local/share/keyrings" 2>/dev/null || :' EXIT
    for _ in $(seq 50); do grep -q mounted "$case_dir/fuse" && break; sleep 0.1; done
    grep -q mounted "$case_dir/fuse" || { cat "$case_dir/fuse"; return 1; }
    as_user security lock-keychain
    [ -n "$devlog" ] && : > "$devlog"
    login
    expect unlocked "$(state WhenUnlocked)" "the unlock was done before the check hung"
    logged "open_session: unlocked the login keychain of $user"
    logged "stopped at the time limit after the unlock; gnome-keyring's login keyring and KWallet's kdewallet are looked for at the next login"
    refute grep -q 'open_session: gave up after the time limit' "${devlog:-/dev/null}"
}

# --- gnome-keyring's login keyring, at the first login ---------------------------------------

# The service as GDM's stack has it: pam_gnome_keyring beside this module (Debian's
# libpam-gnome-keyring; its session part starts gnome-keyring-daemon --login as the user).
write_gnome_keyring_service() {
    cat > "/etc/pam.d/$service" <<PAM
auth     required  pam_unix.so
auth     optional  pam_gnome_keyring.so
auth     optional  $module debug
account  required  pam_unix.so
password required  pam_unix.so yescrypt
password optional  pam_gnome_keyring.so use_authtok
password optional  $module debug
session  required  pam_unix.so
session  optional  pam_gnome_keyring.so auto_start
session  optional  $module debug auto_create lock_on_close
PAM
}

# The user's login.keyring, written by gnome-keyring-daemon itself (in a private bus, as the
# user), its items stored through secret-tool; $1 is the keyring's password.
make_login_keyring() {
    local run=$case_dir/gk-run
    mkdir -p "$run" "$case_dir/no-services" && chown "$uid:$gid" "$run" && chmod 700 "$run"
    sed "s|@SERVICES@|$case_dir/no-services|" "$here/../secret-service/session.conf" > "$case_dir/session.conf"
    chmod 644 "$case_dir/session.conf"
    as_user env XDG_RUNTIME_DIR="$run" timeout 60 dbus-run-session --config-file="$case_dir/session.conf" -- sh -c '
        printf %s "$1" | gnome-keyring-daemon --foreground --unlock --components=secrets > /dev/null 2>&1 &
        daemon=$!
        for _ in $(seq 100); do
            dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner \
                string:org.freedesktop.secrets 2>/dev/null | grep -q true && break
            sleep 0.1
        done
        printf chromium-key-0123 | secret-tool store --label="Chromium Safe Storage" xdg:schema chrome_libsecret_os_crypt_password_v2 application chromium
        printf mail-secret | secret-tool store --label=Mail service imap.example account ann
        kill $daemon; wait $daemon' sh "$1" 2>&1 | grep -v 'fd limit' || true
    [ -f "$home/.local/share/keyrings/login.keyring" ] || { echo "gnome-keyring wrote no login.keyring"; return 1; }
}

# What pam_gnome_keyring started for the user: stopped by pid, so the user can be removed.
stop_user_processes() {
    local pid
    for pid in $(pgrep -u "$uid"); do kill "$pid" 2>/dev/null; done
}

first_login_imports_login_keyring() {
    write_gnome_keyring_service
    make_login_keyring "$password"
    keyring_sum=$(digest "$home/.local/share/keyrings/login.keyring")
    [ ! -e "$keychain" ]
    login
    stop_user_processes
    expect unlocked "$(state WhenUnlocked)"
    expect chromium-key-0123 "$(as_user security find-generic-password -l 'Chromium Safe Storage' -w)" "Chromium's key, at the first login"
    expect mail-secret "$(as_user security find-generic-password -s imap.example -a ann -w)"
    logged 'login keyring imported into the login keychain: 2 added, 0 already there; done once'
    [ -f "$home/.local/share/keychains/.login-keyring-imported" ]
    expect "$uid 600" "$(stat -c '%u %a' "$home/.local/share/keychains/.login-keyring-imported")" "the record, the user's"
    expect "$keyring_sum" "$(digest "$home/.local/share/keyrings/login.keyring")" "login.keyring unchanged"
    # Once: a later login leaves it alone, even when an item was removed since.
    as_user security delete-generic-password -s imap.example -a ann > /dev/null
    [ -n "$devlog" ] && : > "$devlog"
    logout
    login
    stop_user_processes
    logged "open_session: unlocked the login keychain of $user"
    refute grep -q 'login keyring imported' "${devlog:-/dev/null}"
    expect 44 "$(status_of as_user security find-generic-password -s imap.example -a ann)" "not imported again"
}

first_login_with_another_keyring_password() {
    write_gnome_keyring_service
    make_login_keyring 'Other-keyring-pw'
    login
    stop_user_processes
    expect unlocked "$(state WhenUnlocked)" "the login goes on"
    expect 44 "$(status_of as_user security find-generic-password -l 'Chromium Safe Storage')" "nothing imported"
    [ ! -e "$home/.local/share/keychains/.login-keyring-imported" ]
    logged 'login.keyring does not open with the login password'
}

# KWallet's kdewallet, written by the real kwalletd5 (Tests/kde/kwl-fixtures), with the user's
# login password set to the wallet's, as pam_kwallet5 keeps them the same.
kwl_fixtures=$here/../kde/kwl-fixtures
kwl_password='kwl fixture pässword'

install_kdewallet() {  # $1: the fixture wallet installed as the user's kdewallet
    local dir=$home/.local/share/kwalletd
    as_user mkdir -p "$dir"
    install -o "$uid" -g "$gid" -m 600 "$kwl_fixtures/$1.kwl" "$dir/kdewallet.kwl"
    install -o "$uid" -g "$gid" -m 600 "$kwl_fixtures/$1.salt" "$dir/kdewallet.salt"
    [ ! -e "$kwl_fixtures/${1}_attributes.json" ] || install -o "$uid" -g "$gid" -m 600 "$kwl_fixtures/${1}_attributes.json" "$dir/kdewallet_attributes.json"
}

first_login_imports_kdewallet() {
    echo "$user:$kwl_password" | chpasswd
    install_kdewallet kdewallet
    local wallet_sum
    wallet_sum=$(digest "$home/.local/share/kwalletd/kdewallet.kwl")
    login "$kwl_password"
    expect unlocked "$(state WhenUnlocked)"
    logged "KWallet's kdewallet imported into the login keychain: 6 added, 0 already there; done once"
    expect s3cret "$(as_user security find-generic-password -s Passwords -a smtp://alice@example.org -w)" "a KWallet entry, at the first login"
    expect ghp_fixture "$(as_user security find-generic-password -l 'GitHub token' -s github.com -a alice -w)" "kwalletd's Secret Service item"
    [ -f "$home/.local/share/keychains/.kdewallet-imported" ]
    expect "$uid 600" "$(stat -c '%u %a' "$home/.local/share/keychains/.kdewallet-imported")" "the record, the user's"
    expect "$wallet_sum" "$(digest "$home/.local/share/kwalletd/kdewallet.kwl")" "kdewallet.kwl unchanged"
    # Once: a later login leaves it alone, even when an entry was removed since.
    as_user security delete-generic-password -s Passwords -a smtp://alice@example.org > /dev/null
    [ -n "$devlog" ] && : > "$devlog"
    logout
    expect 2 "$(workers_of_a_login "$kwl_password")" "imported once: no import worker"
    logged "open_session: unlocked the login keychain of $user"
    refute grep -q 'kdewallet imported' "${devlog:-/dev/null}"
    expect 44 "$(status_of as_user security find-generic-password -s Passwords -a smtp://alice@example.org)" "not imported again"
}

kdewallet_not_opened_or_hostile() {
    # Another password (the fixture "work" wallet as kdewallet): nothing imported, nothing recorded.
    install_kdewallet work
    login
    expect unlocked "$(state WhenUnlocked)" "the login goes on"
    logged 'kdewallet.kwl does not open with the login password'
    [ ! -e "$home/.local/share/keychains/.kdewallet-imported" ]
    [ ! -e "$home/.local/share/keychains/.kdewallet-tried" ]
    logout
    # A damaged one: one line, recorded against the file, not tried again while it is the same.
    as_user sh -c 'head -c 100 "$HOME/.local/share/kwalletd/kdewallet.kwl" > "$HOME/.local/share/kwalletd/k.new" && mv "$HOME/.local/share/kwalletd/k.new" "$HOME/.local/share/kwalletd/kdewallet.kwl"'
    expect 3 "$(workers_of_a_login "$password")" "a kdewallet not yet imported: the import's worker too"
    logged "KWallet's kdewallet was not imported: "
    grep -q '^ended at .*: failed ' "$home/.local/share/keychains/.kdewallet-tried"
    expect 2 "$(workers_of_a_login "$password")" "the attempt on this file recorded: not tried again"
    [ ! -e "$home/.local/share/keychains/.kdewallet-imported" ]
}


# sshd's sessions never get it: sshd copies the PAM environment over a forwarded agent's socket.
# Through pam_wrapper, so that a service named sshd lives in the case's own folder.
sshd_session_keeps_forwarded_agent() {
    [ -n "$wrapper_lib" ] || { echo "libpam-wrapper is not installed"; return 1; }
    local dir=$case_dir/pamd service_name
    mkdir -p "$dir"
    echo "$user:$password:sshd" > "$case_dir/passdb"
    echo "$user:$password:login" >> "$case_dir/passdb"
    chmod 644 "$case_dir/passdb"
    cat > "$case_dir/env.sh" <<'SH'
#!/bin/sh
[ "$PAM_TYPE" = open_session ] && printf '%s\n' "${SSH_AUTH_SOCK:-unset}" > "$(dirname "$0")/env.$PAM_SERVICE"
SH
    chmod 755 "$case_dir/env.sh"
    chmod 777 "$case_dir"
    for service_name in sshd login; do
        cat > "$dir/$service_name" <<PAM
auth     required  $wrapper_modules/pam_matrix.so passdb=$case_dir/passdb
auth     required  $wrapper_modules/pam_set_items.so
auth     optional  $module debug
account  required  $wrapper_modules/pam_matrix.so passdb=$case_dir/passdb
session  optional  $wrapper_modules/pam_matrix.so passdb=$case_dir/passdb
session  optional  $module debug auto_create
session  optional  pam_exec.so quiet $case_dir/env.sh
PAM
    done
    chmod -R a+rX "$dir"
    as_user mkdir -p "$home/.config/systemd/user/sockets.target.wants"
    as_user ln -s /usr/lib/systemd/user/keychain-ssh-agent.socket "$home/.config/systemd/user/sockets.target.wants/keychain-ssh-agent.socket"
    for service_name in sshd login; do
        printf '%s\n' "$password" | setpriv --reuid="$uid" --regid="$gid" --init-groups env -i HOME="$home" PATH="$bin:/usr/bin:/bin" \
            LD_PRELOAD="$wrapper_lib" PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$dir" PAM_AUTHTOK="$password" \
            pamtester "$service_name" "$user" authenticate open_session >/dev/null
    done
    expect unset "$(cat "$case_dir/env.sshd")" "sshd's session"
    expect "/run/user/$uid/keychain/ssh-agent.socket" "$(cat "$case_dir/env.login")" "the same user's console login"
}

# SSH_AUTH_SOCK in the session (what pam_exec, after the module, sees in the PAM environment):
# set to the keychain's agent only for a user who enabled its socket unit or whose agent's socket
# exists, and never over one already set.
session_ssh_auth_sock() {
    cat > "$case_dir/env.sh" <<'SH'
#!/bin/sh
# pamtester's close_session is another process, with a PAM environment of its own.
[ "$PAM_TYPE" = open_session ] && printf '%s\n' "${SSH_AUTH_SOCK:-unset}" > "$(dirname "$0")/env.out"
SH
    chmod 755 "$case_dir/env.sh"
    local pam_env=$case_dir/pam_env.conf
    : > "$pam_env"
    write_service
    sed -i "/^session  optional  .*libpam_keychain.so/i session  optional  pam_env.so conffile=$pam_env readenv=0 user_readenv=0" "/etc/pam.d/$service"
    echo "session  optional  pam_exec.so quiet $case_dir/env.sh" >> "/etc/pam.d/$service"
    seen() { rm -f "$case_dir/env.out"; login; logout; cat "$case_dir/env.out"; }
    expect unset "$(seen)" "a user who did not enable the agent"

    as_user mkdir -p "$home/.config/systemd/user/sockets.target.wants"
    as_user ln -s /usr/lib/systemd/user/keychain-ssh-agent.socket "$home/.config/systemd/user/sockets.target.wants/keychain-ssh-agent.socket"
    expect "/run/user/$uid/keychain/ssh-agent.socket" "$(seen)" "a user who enabled the socket unit"

    echo "SSH_AUTH_SOCK DEFAULT=/elsewhere/agent" > "$pam_env"
    expect /elsewhere/agent "$(seen)" "one already set is kept"

    rm -r "$home/.config/systemd"
    install -d -o "$uid" -g "$gid" -m 700 "$case_dir/run" "$case_dir/run/keychain"
    echo "XDG_RUNTIME_DIR DEFAULT=$case_dir/run" > "$pam_env"
    expect unset "$(seen)" "no socket, no unit"
    as_user python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$case_dir/run/keychain/ssh-agent.socket"
    expect "$case_dir/run/keychain/ssh-agent.socket" "$(seen)" "the user's agent socket in XDG_RUNTIME_DIR"
    chown root "$case_dir/run/keychain/ssh-agent.socket"
    expect unset "$(seen)" "a socket of another user is not the user's agent"
}

# --- with keychain-broker: the same flows, the class keys in the broker's keeping ------------

# The user's persistent keyring holds no class key (`keychain:ID:A` or `:C`): the broker has them.
no_class_key_in_kernel() {
    local keys
    keys=$(kernel_keys)
    if grep -Eq '^user;.*;keychain:[0-9a-f]+:[AC]$' <<< "$keys"; then echo "class keys in the kernel keyring: $keys"; return 1; fi
}

kept_by_broker() {
    as_user security status 2>&1 | grep -q "custody of keychain-broker" ||
        { echo "status: $(as_user security status 2>&1)"; return 1; }
}

broker_first_login_creates() {
    [ ! -e "$keychain" ]
    login
    [ -f "$keychain" ]
    logged "open_session: created and unlocked the login keychain of $user"
    expect unlocked "$(state WhenUnlocked)"
    expect unlocked "$(state AfterFirstUnlock)"
    kept_by_broker
    no_class_key_in_kernel
    as_user security add-generic-password -a a -s s -w made-at-first-login
    expect made-at-first-login "$(as_user security find-generic-password -a a -w)"
}

broker_sessions_unlock_and_lock() { sessions_counted broker; }

# The count that decides the last logout's lock is the broker's, moved only by root's module: a
# process of the user that raises the count where the module kept it before (the user's
# persistent keyring) keeps nothing unlocked after the last logout, and one that lowers it locks
# nothing early.
broker_sessions_are_out_of_the_users_reach() {
    login
    as_user security add-generic-password -a wu -s s -w wu-secret
    login
    as_user keyctl session - sh -c 'keyctl add user keychain-sessions 1 "$(keyctl get_persistent @s)"' >/dev/null
    logout
    expect unlocked "$(state WhenUnlocked)" "one session still open, whatever the user's keyring says"
    as_user keyctl session - sh -c 'keyctl add user keychain-sessions 99 "$(keyctl get_persistent @s)"' >/dev/null
    logout
    logged "close_session: the last session of $user ended"
    expect locked "$(state WhenUnlocked)" "the last logout locks WhenUnlocked, whatever the user's keyring says"
    expect 36 "$(status_of as_user security find-generic-password -a wu -w)"
}

broker_change_password_rekeys() {
    login
    as_user security add-generic-password -a a -s s -w kept
    printf '%s\n%s\n%s\n' "$password" 'New-pass-2-xyz' 'New-pass-2-xyz' |
        setpriv --ruid="$uid" --regid="$gid" --init-groups --euid=0 pamtester "$service" "$user" chauthtok >/dev/null
    logged "chauthtok: the login keychain of $user is re-keyed to the new password"
    as_user security lock-keychain
    expect 51 "$(printf '%s\n' "$password" | status_of as_user security unlock-keychain)" "the old password no longer opens it"
    printf 'New-pass-2-xyz\n' | as_user security unlock-keychain
    expect kept "$(as_user security find-generic-password -a a -w)"
    logout
    expect locked "$(state WhenUnlocked)"
    login 'New-pass-2-xyz'
    expect unlocked "$(state WhenUnlocked)" "the new login password unlocks at login"
    kept_by_broker
    no_class_key_in_kernel
    expect kept "$(as_user security find-generic-password -a a -w)"
}

check "first login creates the keychain and unlocks both classes" first_login_creates_and_unlocks
check "sessions are counted; the last close locks WhenUnlocked only" sessions_are_counted
check "chauthtok re-keys: the new password unlocks, the old does not" change_password_rekeys
check "without debug: one journal line each for create, unlock, lock and re-key" events_are_logged_without_debug
check "a reset by root keeps the keybag; unlock-keychain says so and re-keys it" root_reset_then_unlock_rekeys
check "a reset the user then changes: unlock-keychain re-keys to the user's password" reset_then_user_changes_it
check "a screen unlock (authenticate + setcred) unlocks at once" screen_unlock
check "a password rejected by pam_unix is never used" rejected_password_is_not_trusted
check "only_if limits the module to the services named" only_if_other_service
check "no password (SSH key, auto-login): nothing touched" no_password_sso
check "wrong keychain password: login goes on, keychain untouched" wrong_keychain_password
check "corrupt keybag: login and password change go on, file untouched" corrupt_keybag
check "missing home: login goes on" missing_home
check "full disk: login goes on" full_disk
check "keychain owned by someone else: refused, login goes on" keychain_of_another_user
check "works with the Swift toolchain hidden" toolchain_hidden
check "exports only the five pam_sm_* symbols, NODELETE" exports_only_pam_entry_points
check "pam_wrapper (pam_matrix, pam_set_items) flows without root" wrapper_flows
check "sudo -u: another user's session never gets the password (no keychain)" sudo_to_another_user_without_keychain
check "sudo -u: another user's keychain and kernel keyring stay untouched" sudo_to_another_user_with_keychain
check "the worker inherits no descriptor (/etc/shadow) and no environment" worker_inherits_no_descriptor_or_environment
check "a reset planted by the user's own process is ignored; nothing re-keyed" planted_reset_is_ignored
check "the first-login import forks its worker only while there is a keyring to import" import_worker_only_when_pending
if /usr/bin/python3 -c 'import cryptography' 2>/dev/null; then
    check "a keyring too large to import at a login costs the first login only; a changed one comes" hostile_keyring_costs_one_login
else
    skip "python3-cryptography is not installed (writes the keyring file)"
fi
if [ -c /dev/fuse ]; then
    check "a keyrings folder that never answers: the unlock is reported, the login goes on" hung_keyrings_folder_costs_only_the_import
else
    skip "/dev/fuse is missing: the hung-folder case needs it"
fi
check "a reset record by root that is stale or names another keychain is ignored" stale_or_foreign_reset_is_ignored
check "a login whose password does not open the keychain re-keys nothing" login_with_other_password_does_not_rekey
check "pam-auth-update: the session line stays out of sudo's and cron's stack" profile_is_interactive_only
check "the session gets SSH_AUTH_SOCK for a user who enabled the keychain's agent, never over one set" session_ssh_auth_sock
check "sshd's session never gets it: a forwarded agent (ssh -A) must win" sshd_session_keeps_forwarded_agent
check "first login: kdewallet.kwl (the real kwalletd5's) comes with the login password, once" first_login_imports_kdewallet
check "a kdewallet the login password does not open, or a damaged one: the login goes on, tried once" kdewallet_not_opened_or_hostile
if [ -e "$(dirname "$(find /usr/lib /lib -name pam_unix.so -path '*security*' 2>/dev/null | head -1)")/pam_gnome_keyring.so" ] &&
        command -v gnome-keyring-daemon >/dev/null; then
    check "first login beside pam_gnome_keyring: login.keyring's items come, once, with no prompt" first_login_imports_login_keyring
    check "a login.keyring the login password does not open: nothing imported, the login goes on" first_login_with_another_keyring_password
else
    skip "pam_gnome_keyring (libpam-gnome-keyring) or gnome-keyring-daemon is not installed"
fi

if start_broker; then
    check "broker: first login creates the keychain, unlocked into the broker (no class key in the kernel)" broker_first_login_creates
    check "broker: open_session unlocks into the broker; the last close_session locks WhenUnlocked there, AfterFirstUnlock stays" broker_sessions_unlock_and_lock
    check "broker: the sessions are counted by the broker, out of the user's reach: a raised count keeps nothing unlocked" broker_sessions_are_out_of_the_users_reach
    check "broker: chauthtok re-keys through the broker; the new password unlocks at login" broker_change_password_rekeys
else
    skip "keychain-broker cases: no broker could be started at /run/keychain-broker/socket"
fi
stop_broker

summary
