#!/usr/bin/env bash
# keychain-secret-service driven by real Secret Service clients: secret-tool (libsecret),
# Debian's python3-secretstorage, git-credential-libsecret built from git's contrib sources,
# docker-credential-secretservice. Each case has its own HOME, XDG folders and keychain, and its
# own session bus (dbus-run-session with a configuration whose only service directory holds an
# activation file for the service in the build folder), so the service is started by D-Bus
# activation as on a desktop and never meets the machine's gnome-keyring. Prompts are answered by
# pinentry.sh, a scripted pinentry.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# Inside a case's bus: run the named function of this file (`on_bus` below comes back here).
if [ "${1:-}" = --inner ]; then
    bin=$2; shift 2
    export PATH="$bin:$PATH"
    inner=1
else
    bin=$(realpath "${1:-.build/debug}")
    export PATH="$bin:$PATH"
    inner=
fi
export GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
py=/usr/bin/python3
client() { "$py" "$here/client.py" "$@"; }
. "$here/../lib.sh"

fresh() {
    case_dir=$(mktemp -d /tmp/secret-service-XXXXXX)
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config
    unset KEYCHAIN_PATH DBUS_SESSION_BUS_ADDRESS
    printf 'pw\n' | security create-keychain >/dev/null
    mkdir "$case_dir/services"
    # The activation file `make install` installs, pointing at the build folder.
    sed "s|@BINDIR@|$bin|" "$here/../../Sources/keychain-secret-service/dbus/org.freedesktop.secrets.service.in" \
        > "$case_dir/services/org.keychain-linux.secrets.service"
    sed "s|@SERVICES@|$case_dir/services|" "$here/session.conf" > "$case_dir/session.conf"
    # The bus, and so the service it starts, inherit these.
    export KEYCHAIN_PINENTRY=$here/pinentry.sh PINENTRY_ANSWERS=$case_dir/answers PINENTRY_LOG=$case_dir/pinentry.log
    : > "$case_dir/answers"
}

finish() {
    local keychain
    for keychain in "$case_dir"/data/keychains/*.keychain-db; do
        [ -e "$keychain" ] && security delete-keychain "$keychain" >/dev/null 2>&1
    done
    rm -rf "$case_dir"
}

# on_bus FUNCTION ARGS...: FUNCTION in a private session bus, bounded in time.
on_bus() {
    timeout 120 dbus-run-session --config-file="$case_dir/session.conf" -- bash "$here/run.sh" --inner "$bin" "$@" \
        2> >(grep -v 'Failed to set fd limit' >&2)
}

answers() { printf '%s\n' "$@" > "$PINENTRY_ANSWERS"; }

# --- cases (each runs inside its bus) ------------------------------------------------------

secret_tool_cases() {
    printf 'hunter2' | secret-tool store --label='Mail' service mail.example account ann extra one
    expect hunter2 "$(secret-tool lookup service mail.example)" "lookup by one pair"
    expect hunter2 "$(secret-tool lookup service mail.example account ann extra one)" "lookup by all pairs"
    ! secret-tool lookup service mail.example extra two
    ! secret-tool lookup service mail.exampl
    out=$(secret-tool search --all extra one 2>&1)
    echo "$out" | grep -qx 'label = Mail'
    echo "$out" | grep -qx 'attribute.account = ann'
    # The same item through security: a generic password with service and account.
    expect hunter2 "$(security find-generic-password -s mail.example -a ann -w)" "security sees it"
    security dump-keychain | grep -q '"svce"<blob>="mail.example"'
    printf 'rotated' | secret-tool store --label='Mail' service mail.example account ann extra one
    expect rotated "$(secret-tool lookup extra one)" "store replaces"
    expect 1 "$(secret-tool search --all extra one 2>&1 | grep -c '^label')" "one item after a second store"
    secret-tool clear extra one
    ! secret-tool lookup service mail.example
    ! security find-generic-password -s mail.example
}

security_to_secret_service() {
    security add-generic-password -s vpn.example -a bob -w from-security
    expect from-security "$(secret-tool lookup service vpn.example account bob)"
    security add-internet-password -s git.example.org -a carol -r htps -w inet-pw
    expect inet-pw "$(secret-tool lookup server git.example.org protocol https)"
    expect inet-pw "$(client lookup user carol)"
}

lock_then_get_secret() {
    printf 'v' | secret-tool store --label=L app locked-test
    security lock-keychain
    client get-secret-locked app locked-test
}

unlock_through_prompt() {
    printf 'v' | secret-tool store --label=L app unlock-test
    security lock-keychain
    answers pw
    client unlock unlocked
    # Unlocked for everyone: security and the helpers read the kernel's keys.
    expect v "$(security find-generic-password -l L -w 2>/dev/null || secret-tool lookup app unlock-test)"
    security show-keychain-info 2>&1 | grep -qi 'unlocked\|no-timeout' || true
    grep -qx GETPIN "$PINENTRY_LOG"
}

wrong_password_then_right() {
    security lock-keychain
    answers wrong pw
    client unlock unlocked
    expect 2 "$(grep -cx GETPIN "$PINENTRY_LOG")" "two tries"
    grep -q '^SETERROR ' "$PINENTRY_LOG"
}

three_wrong_passwords() {
    security lock-keychain
    answers wrong1 wrong2 wrong3 pw
    client unlock dismissed
    expect 3 "$(grep -cx GETPIN "$PINENTRY_LOG")" "three tries, no fourth"
    expect pw "$(head -1 "$PINENTRY_ANSWERS")" "the fourth answer was never asked for"
}

cancelled_prompt() {
    security lock-keychain
    answers CANCEL
    client unlock dismissed
}

no_pinentry() {
    security lock-keychain
    KEYCHAIN_PINENTRY=/nonexistent/pinentry
    export KEYCHAIN_PINENTRY
    client unlock dismissed
}

dismiss_prompt() {
    security lock-keychain
    client dismiss
}

secret_tool_prompts_when_locked() {
    printf 'behind-lock' | secret-tool store --label=L app prompted
    security lock-keychain
    answers pw
    expect behind-lock "$(secret-tool lookup app prompted)" "libsecret unlocks through the prompt"
}

create_and_delete_collection() {
    answers newpassword
    path=$(client create-collection "Work Stuff")
    expect /org/freedesktop/secrets/collection/Work_5fStuff "$path"
    grep -q '^SETREPEAT' "$PINENTRY_LOG"
    file=$XDG_DATA_HOME/keychains/Work_Stuff.keychain-db
    security lock-keychain "$file"
    printf 'newpassword\n' | security unlock-keychain "$file"
    expect 'new secret' "$(security find-generic-password -l 'in new' -w "$file")" "security reads the new keychain"
    client delete-collection "$path"
    [ ! -e "$file" ]
}

plain_session() { client roundtrip plain; }
dh_session() { client roundtrip dh; }
malformed_calls() { client malformed; }
properties_and_aliases() { client properties; }
close_session() { client close-session; }

thousand_sessions_dropped_with_their_client() {
    expect 1000 "$(client sessions 1000)"
    # The client has left the bus: NameOwnerChanged took its sessions away.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        [ "$(client session-count)" = 0 ] && break
        sleep 0.2
    done
    expect 0 "$(client session-count)" "sessions left after the client vanished"
}

session_collection() {
    # What a killed run left: removed once the session collection is first used.
    dead=$(sh -c 'echo $$')
    leftover=${XDG_RUNTIME_DIR:-/tmp}/keychain-session-$dead-killed
    mkdir -m 700 "$leftover" && : > "$leftover/session.keychain-db"
    printf 'pw\n' | security create-keychain session >/dev/null
    client session-collection
    expect on-disk-secret "$(security find-generic-password -s disk-session -w "$XDG_DATA_HOME/keychains/session.keychain-db")" \
        "the keychain named session keeps its item on disk"
    [ ! -e "$leftover" ] || { echo "$leftover left behind"; return 1; }
    printf 'session-secret-Q7y' | secret-tool store --collection=session --label=T held session-attr-Z3
    expect session-secret-Q7y "$(secret-tool lookup held session-attr-Z3)" "secret-tool through the session collection"
    ! security dump-keychain | grep -q session-attr-Z3
    service=$(pgrep -n -f "$bin/keychain-secret-service")
    folder=$(echo "${XDG_RUNTIME_DIR:-/tmp}/keychain-session-$service"-*)
    [ -f "$folder/session.keychain-db" ] || { echo "no session keychain in $folder"; return 1; }
    expect 700 "$(stat -c %a "$folder")" "the session keychain's folder"
    ! grep -rqa -e session-secret-Q7 -e session-attr-Z3 -e for-the-session "$folder"
    # Stopped as systemd stops it: the file goes; the next client starts a service whose
    # session collection is empty.
    kill -TERM "$service"
    for _ in $(seq 50); do kill -0 "$service" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$service" 2>/dev/null
    [ ! -e "$folder" ] || { echo "$folder left behind"; return 1; }
    ! secret-tool lookup held session-attr-Z3
}

name_taken_and_replace() {
    printf 'v' | secret-tool store --label=L app owner  # activates the service
    first=$(pgrep -n -f "$bin/keychain-secret-service")
    ! out=$(keychain-secret-service 2>&1)
    echo "$out" | grep -q "already provided by .*pid $first"
    expect 1 "$(echo "$out" | wc -l)" "one line"
    keychain-secret-service --replace 2> "$HOME/replacer.log" &
    replacer=$!
    for _ in $(seq 50); do kill -0 "$first" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$first" 2>/dev/null
    expect v "$(secret-tool lookup app owner)" "the new owner serves"
    kill "$replacer"
}

git_credential_libsecret_shares_with_keychain() {
    local libsecret=$LIBSECRET_HELPER
    printf 'protocol=https\nhost=git.example.com\nusername=ann\npassword=from-libsecret\n\n' | "$libsecret" store
    out=$(printf 'protocol=https\nhost=git.example.com\n\n' | git-credential-keychain get)
    echo "$out" | grep -qx 'password=from-libsecret'
    echo "$out" | grep -qx 'username=ann'
    expect from-libsecret "$(security find-internet-password -s git.example.com -r htps -w)"
    printf 'protocol=https\nhost=other.example.com:8443\nusername=bob\npassword=from-keychain\n\n' | git-credential-keychain store
    out=$(printf 'protocol=https\nhost=other.example.com:8443\n\n' | "$libsecret" get)
    echo "$out" | grep -qx 'password=from-keychain'
    echo "$out" | grep -qx 'username=bob'
    # A store through libsecret updates the credential git-credential-keychain stored.
    printf 'protocol=https\nhost=other.example.com:8443\nusername=bob\npassword=rotated\n\n' | "$libsecret" store
    expect 'password=rotated' "$(printf 'protocol=https\nhost=other.example.com:8443\n\n' | git-credential-keychain get | grep '^password=')"
    expect 1 "$(security dump-keychain | grep -c '"srvr"<blob>="other.example.com"')" "one credential, not two"
    printf 'protocol=https\nhost=git.example.com\nusername=ann\n\n' | "$libsecret" erase
    [ -z "$(printf 'protocol=https\nhost=git.example.com\n\n' | git-credential-keychain get)" ]
}

docker_credential_secretservice() {
    printf '{"ServerURL":"https://registry.example.com","Username":"ann","Secret":"tok3n"}' | docker-credential-secretservice store
    expect '{"ServerURL":"https://registry.example.com","Username":"ann","Secret":"tok3n"}' \
        "$(printf 'https://registry.example.com' | docker-credential-secretservice get)"
    docker-credential-secretservice list | grep -q '"https://registry.example.com":"ann"'
    printf 'https://registry.example.com' | docker-credential-secretservice erase
    ! printf 'https://registry.example.com' | docker-credential-secretservice get
}

lock_is_announced() {
    "$py" - <<'PY' &
import secretstorage, sys
from jeepney import MatchRule, message_bus
from jeepney.io.blocking import Proxy
connection = secretstorage.dbus_init()
rule = MatchRule(type='signal', interface='org.freedesktop.DBus.Properties', member='PropertiesChanged',
                 path='/org/freedesktop/secrets/collection/login')
Proxy(message_bus, connection).AddMatch(rule)
secretstorage.get_default_collection(connection).is_locked()
print('ready', flush=True)
with connection.filter(rule) as signals:
    while True:
        signal = connection.recv_until_filtered(signals, timeout=20)
        if 'Locked' in signal.body[1]:
            print('locked', signal.body[1]['Locked'][1], flush=True)
            break
PY
    watcher=$!
    sleep 1
    security lock-keychain
    wait "$watcher"
}

# Run as nobody against a bus that accepts and never answers, so the service waits for its name;
# an undumpable process's /proc files belong to root. `cat`, dumpable, is the control.
undumpable() {
    local pid owner tool
    chmod 755 "$case_dir"
    mkdir "$case_dir/nobody" && chown nobody "$case_dir/nobody"
    "$py" -c '
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(8)
held = []
deadline = time.time() + 30
while time.time() < deadline:
    s.settimeout(1)
    try: held.append(s.accept()[0])
    except socket.timeout: pass
' "$case_dir/nobody/bus" &
    local silent=$!
    while [ ! -S "$case_dir/nobody/bus" ]; do sleep 0.05; done
    cp "$bin/keychain-secret-service" /bin/cat "$case_dir/" && chmod 755 "$case_dir/keychain-secret-service"
    for tool in cat keychain-secret-service; do
        HOME=$case_dir/nobody DBUS_SESSION_BUS_ADDRESS=unix:path=$case_dir/nobody/bus \
            setpriv --reuid=nobody --regid=nogroup --clear-groups "$case_dir/$tool" < /dev/zero > /dev/null 2>&1 &
        pid=$!
        sleep 0.5
        owner=$(stat -c %U "/proc/$pid/status")
        kill "$pid"; wait "$pid" 2>/dev/null || true
        expect "$([ $tool = cat ] && echo nobody || echo root)" "$owner" "owner of /proc/PID/status of $tool run as nobody"
    done
    kill "$silent"
}

# --- the suite ------------------------------------------------------------------------------

if [ -n "$inner" ]; then
    set -e
    "$@"
    exit
fi

libsecret_dir=$(mktemp -d /tmp/secret-service-libsecret-XXXXXX)
trap 'rm -rf "$libsecret_dir"' EXIT
libsecret_src=/usr/share/doc/git/contrib/credential/libsecret
if make -s -C "$libsecret_dir" -f "$libsecret_src/Makefile" VPATH="$libsecret_src" >/dev/null 2>&1; then
    export LIBSECRET_HELPER=$libsecret_dir/git-credential-libsecret
fi

check "secret-tool store, lookup (exact pairs), search, clear; security sees the item" on_bus secret_tool_cases
check "items security stored, found through the Secret Service" on_bus security_to_secret_service
check "SecretStorage in a plain session: create, search, get, set, relabel, reattribute, replace, delete" on_bus plain_session
check "SecretStorage in a DH session (dh-ietf1024-sha256-aes128-cbc-pkcs7): the same" on_bus dh_session
check "security lock-keychain, then GetSecret: IsLocked; SearchItems lists the item as locked" on_bus lock_then_get_secret
check "Unlock through a prompt answered by pinentry unlocks for security too" on_bus unlock_through_prompt
check "a wrong password, then the right one: SETERROR and a second GETPIN" on_bus wrong_password_then_right
check "three wrong passwords: Completed dismissed, no fourth try" on_bus three_wrong_passwords
check "pinentry cancelled: Completed dismissed, still locked" on_bus cancelled_prompt
check "no pinentry program: Completed dismissed, never a hang" on_bus no_pinentry
check "Dismiss: Completed dismissed, the prompt object gone" on_bus dismiss_prompt
check "secret-tool lookup on a locked keychain goes through the prompt" on_bus secret_tool_prompts_when_locked
check "malformed calls: InvalidArgs, NotSupported, NoSession, UnknownObject; huge attributes; still serving" on_bus malformed_calls
check "properties, aliases, collection label, introspection" on_bus properties_and_aliases
check "CreateCollection through a prompt makes a keychain security can open; Delete removes it" on_bus create_and_delete_collection
check "Session.Close, then the session is gone" on_bus close_session
check "1,000 sessions, dropped when their client leaves the bus" on_bus thousand_sessions_dropped_with_their_client
check "the session collection: alias, never locked, not deletable, unreadable on disk, gone with the service" on_bus session_collection
check "a second provider exits naming the owner; --replace takes the name over" on_bus name_taken_and_replace
check "security lock-keychain is announced with PropertiesChanged(Locked)" on_bus lock_is_announced
if [ "$(id -u)" = 0 ]; then
    check "the service is undumpable from the start" undumpable
else
    skip "the undumpable check runs the service as nobody, which needs root"
fi
if [ -n "${LIBSECRET_HELPER:-}" ]; then
    check "git-credential-libsecret and git-credential-keychain share credentials both ways" on_bus git_credential_libsecret_shares_with_keychain
else
    skip "git-credential-libsecret could not be built from $libsecret_src (libsecret-1-dev missing?)"
fi
if command -v docker-credential-secretservice >/dev/null; then
    check "docker-credential-secretservice store, get, list, erase" on_bus docker_credential_secretservice
else
    skip "docker-credential-secretservice is not installed (golang-docker-credential-helpers)"
fi
summary
