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

# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
# Inside a case's bus: run the named function of this file (see bus_suite_start).
bus_suite_start "$@"
[ -z "$inner" ] || shift 2
client() { "$py" "$here/client.py" "$@"; }

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
    export KEYCHAIN_PINENTRY=$here/pinentry.sh PINENTRY_ANSWERS=$case_dir/answers PINENTRY_LOG=$case_dir/pinentry.log \
        PINENTRY_RUNS=$case_dir/runs
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

# on_bus_alone DAEMON FUNCTION ARGS...: FUNCTION in a private session bus run by the dbus-daemon
# DAEMON, all in a pid namespace of their own (so the case chooses pids); the bus's and the
# service's messages kept in case_dir/bus.log.
on_bus_alone() {
    local daemon=$1; shift
    timeout 120 unshare --pid --fork --kill-child --mount-proc dbus-run-session --dbus-daemon="$daemon" --config-file="$case_dir/session.conf" \
        -- bash "$here/run.sh" --inner "$bin" "$@" 2> >(grep -v 'Failed to set fd limit' | tee -a "$case_dir/bus.log" >&2)
}

# pid_reuse_refused DAEMON FUNCTION: a pid-reuse case on a bus run by DAEMON; the service says how
# that bus names its clients: by the pidfd of GetConnectionCredentials' ProcessFD (dbus 1.15.8 and
# later), else by pid.
pid_reuse_refused() {
    local daemon=$1 function=$2 how
    on_bus_alone "$daemon" "$function"
    if "$daemon" --version | grep -Eq 'Daemon 1\.(15\.([89]|[1-9][0-9])|1[6-9]|[2-9][0-9])\.'; then
        how="the bus names each client's process by a pidfd (ProcessFD)"
    else
        how="the bus gives no ProcessFD (dbus before 1.15.8): each client's process is found by its pid"
    fi
    grep -qF "keychain-secret-service: $how" "$case_dir/bus.log"
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
    grep -qx 'label = Mail' <<< "$out"
    grep -qx 'attribute.account = ann' <<< "$out"
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
    answers newpassword
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

session_keychain_made_on_first_use() {
    # Searches do not make the session collection's keychain: unused, it holds nothing.
    expect 0 "$(client count made-on-first-use yes)"
    service=$(pgrep -n -f "$bin/keychain-secret-service")
    folder=$(echo "${XDG_RUNTIME_DIR:-/tmp}/keychain-session-$service"-*)
    [ ! -e "$folder/session.keychain-db" ] || { echo "a search made the session keychain"; return 1; }
    # Its first item makes it, and searches find that item from then on.
    printf 'first-use-secret' | secret-tool store --collection=session --label=T made-on-first-use yes
    [ -f "$folder/session.keychain-db" ] || { echo "no session keychain in $folder"; return 1; }
    expect 1 "$(client count made-on-first-use yes)"
    expect first-use-secret "$(secret-tool lookup made-on-first-use yes)"
}

name_taken_and_replace() {
    printf 'v' | secret-tool store --label=L app owner  # activates the service
    first=$(pgrep -n -f "$bin/keychain-secret-service")
    ! out=$(keychain-secret-service 2>&1)
    # By its executable's name, not the 15 characters of its comm ("keychain-secret").
    grep -q "already provided by keychain-secret-service (pid $first)" <<< "$out"
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
    grep -qx 'password=from-libsecret' <<< "$out"
    grep -qx 'username=ann' <<< "$out"
    expect from-libsecret "$(security find-internet-password -s git.example.com -r htps -w)"
    printf 'protocol=https\nhost=other.example.com:8443\nusername=bob\npassword=from-keychain\n\n' | git-credential-keychain store
    out=$(printf 'protocol=https\nhost=other.example.com:8443\n\n' | "$libsecret" get)
    grep -qx 'password=from-keychain' <<< "$out"
    grep -qx 'username=bob' <<< "$out"
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

# The service lists the keychains folder again only when the kernel's watch (or, where it cannot be
# armed, the folder's times) says it changed: after a quiet moment (times a second old), a keychain
# made, a new default (chosen by `security`, or written into the choice file in place) and a
# removal still show at once.
ss_get() {
    dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets "$@"
}
changes_after_a_quiet_folder_show() {
    ss_get org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Service string:Collections >/dev/null
    sleep 2.2
    ss_get org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Service string:Collections >/dev/null
    printf 'laterpw\n' | security create-keychain later >/dev/null
    ss_get org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Service string:Collections | grep -q '/collection/later"' ||
        { echo "Collections lacks the keychain made after a quiet moment"; return 1; }
    sleep 2.2
    ss_get org.freedesktop.Secret.Service.ReadAlias string:default >/dev/null
    security default-keychain -s "$XDG_DATA_HOME/keychains/later.keychain-db"
    ss_get org.freedesktop.Secret.Service.ReadAlias string:default | grep -q '/collection/later"' ||
        { echo "the default alias does not follow security default-keychain -s"; return 1; }
    security default-keychain -s "$XDG_DATA_HOME/keychains/login.keychain-db"
    ss_get org.freedesktop.Secret.Service.ReadAlias string:default | grep -q '/collection/login"' ||
        { echo "the default alias does not follow security default-keychain -s back"; return 1; }
    sleep 2.2
    ss_get org.freedesktop.Secret.Service.ReadAlias string:default >/dev/null
    printf '%s\n' "$XDG_DATA_HOME/keychains/later.keychain-db" > "$XDG_CONFIG_HOME/keychain/default-keychain"
    ss_get org.freedesktop.Secret.Service.ReadAlias string:default | grep -q '/collection/later"' ||
        { echo "the default alias does not follow the choice file written in place"; return 1; }
    security default-keychain -s "$XDG_DATA_HOME/keychains/login.keychain-db"
    sleep 2.2
    ss_get org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Service string:Collections >/dev/null
    security delete-keychain "$XDG_DATA_HOME/keychains/later.keychain-db"
    if ss_get org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Service string:Collections | grep -q '/collection/later"'; then
        echo "Collections still lists a deleted keychain"; return 1
    fi
    # A keychain file replaced by another under its name (renamed over it) is another keychain: the
    # service must not go on answering from the replaced file it had open.
    again=$XDG_DATA_HOME/keychains/again.keychain-db
    printf 'againpw\n' | security create-keychain "$again" >/dev/null
    security add-generic-password -s made-before -a a -w old-secret "$again"
    ss_get org.freedesktop.Secret.Service.SearchItems dict:string:string:service,made-before | grep -q '/collection/again/' ||
        { echo "SearchItems does not find the item of the keychain made first"; return 1; }
    printf 'otherpw\n' | security create-keychain "$XDG_DATA_HOME/other.keychain-db" >/dev/null
    security add-generic-password -s made-after -a a -w new-secret "$XDG_DATA_HOME/other.keychain-db"
    mv "$XDG_DATA_HOME/other.keychain-db" "$again"
    if ss_get org.freedesktop.Secret.Service.SearchItems dict:string:string:service,made-before | grep -q '/collection/again/'; then
        echo "SearchItems still finds the item of the keychain file replaced under its name"; return 1
    fi
    ss_get org.freedesktop.Secret.Service.SearchItems dict:string:string:service,made-after | grep -q '/collection/again/' ||
        { echo "SearchItems does not find the item of the keychain file now under that name"; return 1; }
    # The folder above the keychains folder moved away and another put in its place: the path now
    # names another folder, though nothing in the one the service watched changed.
    sleep 2.2
    ss_get org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Service string:Collections >/dev/null
    mv "$XDG_DATA_HOME" "$XDG_DATA_HOME.moved"
    mkdir -p "$XDG_DATA_HOME/keychains"
    printf 'elsewherepw\n' | security create-keychain "$XDG_DATA_HOME/keychains/elsewhere.keychain-db" >/dev/null
    ss_get org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Service string:Collections | grep -q '/collection/elsewhere"' ||
        { echo "Collections lacks the keychain of a folder put in place of the one moved away"; return 1; }
    rm -rf "$XDG_DATA_HOME"
    mv "$XDG_DATA_HOME.moved" "$XDG_DATA_HOME"
}

# --- the second review's attacks, each refused ----------------------------------------------

login_and_default_are_kept() {
    login=$XDG_DATA_HOME/keychains/login.keychain-db
    printf 'otherpw\n' | security create-keychain other >/dev/null
    other=$XDG_DATA_HOME/keychains/other.keychain-db
    security add-generic-password -s kept -a ann -w kept-secret
    client guard_default /org/freedesktop/secrets/collection/other
    expect "$login" "$(security default-keychain | tr -d ' "')" "security's default keychain"
    [ -f "$login" ]
    expect kept-secret "$(security find-generic-password -s kept -w)"
    # Locked, the login keychain is no easier to delete.
    security lock-keychain
    client delete_refused /org/freedesktop/secrets/collection/login
    [ -f "$login" ]
    # The default keychain, wherever the user put it, is not deleted through the service either.
    security default-keychain -s "$other"
    client delete_refused /org/freedesktop/secrets/collection/other
    client delete_refused /org/freedesktop/secrets/aliases/default
    [ -f "$other" ]
    security default-keychain -s "$login"
}

delete_takes_the_keychains_password() {
    printf 'otherpw\n' | security create-keychain other >/dev/null
    other=$XDG_DATA_HOME/keychains/other.keychain-db
    answers wrong1 wrong2 wrong3
    client delete_through_prompt /org/freedesktop/secrets/collection/other dismissed
    [ -f "$other" ]
    answers otherpw
    client delete_through_prompt /org/freedesktop/secrets/collection/other deleted
    for leftover in "$other" "$other-wal" "$other-shm" "$other-journal"; do
        [ ! -e "$leftover" ] || { echo "$leftover left behind"; return 1; }
    done
    # A keychain that also holds what the service does not manage stays, password or not.
    printf 'certpw\n' | security create-keychain certs >/dev/null
    certs=$XDG_DATA_HOME/keychains/certs.keychain-db
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$HOME/k.pem" -out "$HOME/c.pem" -days 1 -subj /CN=kept 2>/dev/null
    security import "$HOME/c.pem" -k "$certs" >/dev/null
    answers certpw
    client delete_through_prompt /org/freedesktop/secrets/collection/certs dismissed
    [ -f "$certs" ]
    security find-certificate -c kept "$certs" >/dev/null
}

replace_touches_only_the_same_attributes() {
    printf 'protocol=https\nhost=git.example.com\nusername=ann\npassword=git-secret\n\n' | git-credential-keychain store
    printf '{"ServerURL":"https://registry.example.com","Username":"bob","Secret":"docker-secret"}' | docker-credential-keychain store
    security add-generic-password -s cli.example -a carol -w cli-secret
    printf 'wide' | secret-tool store --label=W app x profile work
    login=/org/freedesktop/secrets/collection/login
    client create_raw "$login" replace >/dev/null
    client create_raw "$login" replace app x >/dev/null
    expect password=git-secret "$(printf 'protocol=https\nhost=git.example.com\n\n' | git-credential-keychain get | grep '^password=')"
    printf 'https://registry.example.com' | docker-credential-keychain get | grep -q docker-secret
    expect cli-secret "$(security find-generic-password -s cli.example -w)"
    expect wide "$(secret-tool lookup app x profile work)" "the wider item"
    expect 2 "$(client count app x)" "the wider item and the narrower one"
    # The item with the same set is the one replaced.
    client create_raw "$login" replace app x profile work >/dev/null
    expect 1 "$(client count profile work)" "one item with that set after its replace"
    expect raw-secret "$(secret-tool lookup app x profile work)"
}

# As gnome-keyring: the item replaced keeps its object path; the collection says ItemChanged.
replace_changes_the_item_in_place() {
    client listen "$HOME/ready" 3 > "$HOME/signals" &
    listener=$!
    for _ in $(seq 100); do [ -s "$HOME/ready" ] && break; sleep 0.05; done
    printf 'one' | secret-tool store --label=A inplace x
    first=$(secret-tool search inplace x 2>&1 | grep '^\[/')
    printf 'two' | secret-tool store --label=B inplace x
    wait "$listener"
    expect two "$(secret-tool lookup inplace x)"
    expect "$first" "$(secret-tool search inplace x 2>&1 | grep '^\[/')" "the same item path"
    expect 1 "$(grep -c '^ItemCreated' "$HOME/signals")" "one ItemCreated"
    expect 1 "$(grep -c '^ItemChanged' "$HOME/signals")" "one ItemChanged"
    expect 0 "$(grep -c '^ItemDeleted' "$HOME/signals")" "no ItemDeleted"
}

# An item planted in a weaker class (Always: its key in the file, no password needed) with the
# attributes a client stores gives way to the new item instead of passing its class on to it.
replace_never_inherits_a_weaker_class() {
    security add-generic-password -s planted.example -a ann --accessibility always -w planted
    printf 'new' | secret-tool store --label=L service planted.example account ann
    expect new "$(secret-tool lookup service planted.example account ann)"
    expect 1 "$(security find-generic-password -s planted.example -a ann 2>&1 | grep -c '^keychain:')" "one item"
    security lock-keychain
    if security find-generic-password -s planted.example -a ann -w; then
        echo "the new secret is readable while the keychain is locked"
        return 1
    fi
}

signals_tell_a_sandboxed_app_nothing() {
    printf 'before' | secret-tool store --label='Bank' service bank.example account alice-private-acct
    confined org.example.Listener "$py" "$here/client.py" listen "$HOME/ready" 6 > "$HOME/signals" &
    listener=$!
    for _ in $(seq 100); do [ -s "$HOME/ready" ] && break; sleep 0.05; done
    [ -s "$HOME/ready" ]
    client relabel service bank.example 'Bank (renamed)'
    printf 'new' | secret-tool store --label='Payroll' service payroll.example account bob-private-acct
    wait "$listener"
    grep -q ItemCreated "$HOME/signals" || { echo "the listener heard nothing"; cat "$HOME/signals" "$HOME/ready"; return 1; }
    ! grep -e 'renamed' -e 'private-acct' -e 'Payroll' -e 'payroll' "$HOME/signals"
}

a_sandboxed_app_holds_one_prompt() {
    security lock-keychain
    answers CANCEL
    confined org.example.App "$py" "$here/client.py" app_prompts org.example.App
    grep -q '^SETDESC .*org\.example\.App' "$PINENTRY_LOG"
}

# root: a pid is handed to the next process by writing the one before it to ns_last_pid.
# The two pid-reuse cases run in a pid namespace of their own (on_bus_alone), where nothing but the
# case takes pids: the pid of the app's connecting process, gone, goes to an unconfined `sleep` the
# case starts, through ns_last_pid. The app's connection must not be taken for that process.
#
# pid_reuse_after_the_service_saw_it: the service has seen the connection appear (the app pinged
# it) before the pid is reused: refused on any bus, the new process having started later.
pid_reuse_after_the_service_saw_it() {
    printf 'v' | secret-tool store --label=L app pid-reuse
    confined org.example.App "$py" "$here/client.py" pid_reuse "$HOME/ready" "$HOME/go" ping > "$HOME/reuse.log" 2>&1 &
    reuse_the_apps_pid "$!"
}

# pid_reuse_while_the_service_is_stopped: the service is stopped while the connection appears, its
# process exits and the pid is reused, so the service learns of the connection only after the new
# process started. Only a bus that names the connecting process by a pidfd (ProcessFD) can tell:
# refused there.
pid_reuse_while_the_service_is_stopped() {
    printf 'v' | secret-tool store --label=L app pid-reuse
    local service
    service=$(dbus-send --session --print-reply=literal --dest=org.freedesktop.DBus / \
        org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets | awk '{ print $2 }')
    kill -STOP "$service"
    confined org.example.App "$py" "$here/client.py" pid_reuse "$HOME/ready" "$HOME/go" > "$HOME/reuse.log" 2>&1 &
    reuse_the_apps_pid "$!" "$service"
}

# reuse_the_apps_pid APP [STOPPED]: once the app APP (client.py pid_reuse) has its connection and
# its connecting child is gone, gives the child's pid to `sleep`, continues the stopped service
# STOPPED, and lets the app call.
reuse_the_apps_pid() {
    local app=$1 stopped=${2:-} child sleeper
    for _ in $(seq 600); do [ -s "$HOME/ready" ] && break; sleep 0.1; done
    child=$(cat "$HOME/ready")
    # No process may start between these two lines (a command substitution would).
    echo $((child - 1)) > /proc/sys/kernel/ns_last_pid
    sleep 60 &
    sleeper=$!
    [ -z "$stopped" ] || kill -CONT "$stopped"
    touch "$HOME/go"
    wait "$app" || { cat "$HOME/reuse.log"; kill "$sleeper"; return 1; }
    kill "$sleeper"
    expect "$child" "$sleeper" "the sleeper's pid"
}

default_keychain_by_any_spelling() {
    printf 'workpw\n' | security create-keychain work >/dev/null
    # The service starts and lists the folder before the default is named another way.
    expect /org/freedesktop/secrets/collection/login "$(client read_alias default)"
    security default-keychain -s "$XDG_DATA_HOME/keychains//work.keychain-db"
    expect /org/freedesktop/secrets/collection/work "$(client read_alias default)"
    client set_alias_refused default /org/freedesktop/secrets/collection/login
    client delete_refused /org/freedesktop/secrets/collection/work
    expect "$XDG_DATA_HOME/keychains/work.keychain-db" "$(security default-keychain | tr -d ' "')" "the default after SetAlias"
}

foreign_prompt() {
    security lock-keychain
    client foreign_prompt
    ! grep -qx GETPIN "$PINENTRY_LOG"
}

prompts_capped_and_queued() {
    security lock-keychain
    : > "$PINENTRY_RUNS"
    answers CANCEL CANCEL CANCEL CANCEL CANCEL CANCEL CANCEL CANCEL
    client prompt_limits 8
    expect 8 "$(grep -cx start "$PINENTRY_RUNS")" "pinentry runs"
    # One at a time: every start is followed by its end before the next start.
    expect "$(printf 'start\nend\n%.0s' 1 2 3 4 5 6 7 8)" "$(cat "$PINENTRY_RUNS")" "pinentry runs in order"
}

presence_item_is_refused_not_locked() {
    security add-generic-password -s guarded.example -a ann -w guarded --require user-presence
    client presence_item service guarded.example
    # libsecret gives up instead of unlocking an unlocked collection round and round.
    ! timeout 20 secret-tool lookup service guarded.example
}

pipelined_stores_answered_after_their_commit() {
    security add-generic-password -s guarded.example -a ann -w guarded --require user-presence
    client pipelined 200
    # Stored for every other program too, not only in the service's view.
    expect 1 "$(secret-tool search --all pipeline yes n 7 2>&1 | grep -c '^secret = secret-7$')" "secret-tool finds an item stored in the group"
}

# A store waiting for its commit is committed by whichever call comes next; when that is a
# sandboxed app's, the store's signals must still go out (read in the broadcast's view, not the
# app's). The service is stopped while the two calls reach its socket, so their order is fixed.
stores_are_announced_whoever_commits_them() {
    local login=/org/freedesktop/secrets/collection/login
    client create_raw "$login" replace app announced >/dev/null
    client listen "$HOME/listening" 10 > "$HOME/signals" &
    local listener=$!
    client create_on_cue "$HOME/store-ready" "$HOME/go" "$login" app announced > "$HOME/replaced" &
    local store=$!
    for _ in $(seq 100); do [ -s "$HOME/listening" ] && [ -s "$HOME/store-ready" ] && break; sleep 0.05; done
    [ -s "$HOME/listening" ] && [ -s "$HOME/store-ready" ]
    stopped_service=$(pgrep -n -f "$bin/keychain-secret-service")
    # A stopped service would outlive the case if it failed here.
    trap 'kill -CONT "$stopped_service" 2>/dev/null || :' EXIT
    kill -STOP "$stopped_service"
    touch "$HOME/go"
    sleep 0.5
    confined org.example.App "$py" "$here/client.py" count app announced > "$HOME/app-count" &
    local app=$!
    # Time for the app to start in its sandbox and send its search; nothing outside shows when.
    sleep 3
    kill -CONT "$stopped_service"
    wait "$store" "$app" "$listener"
    expect 0 "$(cat "$HOME/app-count")" "the app's search, which committed the store, finds none of it"
    grep -q '^ItemChanged' "$HOME/signals" || { echo "no ItemChanged heard"; cat "$HOME/signals"; return 1; }
    grep -q "^PropertiesChanged ('org.freedesktop.Secret.Item'" "$HOME/signals" || {
        echo "the item's PropertiesChanged was not sent"; cat "$HOME/signals"; return 1
    }
}

pipelined_secrets_are_wiped() {
    client pipelined_secrets_wiped 30
}

# confined APP COMMAND...: COMMAND in a sandbox as Flatpak makes one: a new root with the system's
# /usr and /etc, this machine's /tmp (the bus's socket), and a /.flatpak-info naming APP.
confined() {
    local app=$1; shift
    printf '[Application]\nname=%s\nruntime=runtime/org.example.Platform/x86_64/1\n' "$app" > "$HOME/flatpak-info-$app"
    sandboxed "$HOME/flatpak-info-$app" "$@"
}

# sandboxed INFO COMMAND...: the same sandbox with the file INFO as its /.flatpak-info.
sandboxed() {
    local info=$1; shift
    bwrap --tmpfs / --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
        --symlink usr/sbin /sbin --ro-bind /etc /etc --proc /proc --dev /dev --bind /tmp /tmp --ro-bind "$here" "$here" \
        --ro-bind "$info" /.flatpak-info --setenv DBUS_SESSION_BUS_ADDRESS "$DBUS_SESSION_BUS_ADDRESS" \
        --unsetenv XDG_RUNTIME_DIR --chdir / -- "$@"
}

sandboxed_app_sees_its_own_items() {
    printf 'protocol=https\nhost=git.example.com\nusername=ann\npassword=git-secret\n\n' | git-credential-keychain store
    printf '{"ServerURL":"https://registry.example.com","Username":"bob","Secret":"docker-secret"}' | docker-credential-keychain store
    security add-generic-password -s cli.example -a carol -w cli-secret
    printf 'unconfined' | secret-tool store --label=U owner-test unconfined
    confined org.example.Other "$py" "$here/client.py" store other other-secret owner-test org.example.Other
    mapfile -t others < <(client paths; confined org.example.Other "$py" "$here/client.py" paths)
    expect 5 "${#others[@]}" "items before the app ran: four of unconfined programs, one of another app"
    confined org.example.App "$py" "$here/client.py" confined org.example.App "${others[@]}"
    # The app's items: its own, shown to unconfined programs with the app that made them.
    expect git-secret "$(printf 'protocol=https\nhost=git.example.com\n\n' | git-credential-keychain get | sed -n 's/^password=//p')" \
        "git's credential after the app stored one with its attributes"
    # Unconfined programs find none of the app's items in place of their own (Chromium's key,
    # a VPN password, found by their attributes), and their own when they store one.
    expect 4 "$(client paths | wc -l)" "unconfined, the items no app made"
    ! secret-tool lookup owner-test org.example.App
    ! secret-tool lookup application chrome xdg:schema chrome_libsecret_os_crypt_password_v2
    ! security find-generic-password -s vpn.example
    printf 'real-vpn' | secret-tool store --label=VPN service vpn.example username alice
    expect real-vpn "$(secret-tool lookup service vpn.example username alice)"
    expect real-vpn "$(security find-generic-password -s vpn.example -w)"
    # security lists the app's items, and which app made them.
    expect 4 "$(security dump-keychain | grep -cx '    "ssow"<blob>="org.example.App"')" "items dump-keychain shows as the app's"
    # A sandbox whose /.flatpak-info names no app is refused everything.
    printf '[Application]\nruntime=x\n' > "$HOME/flatpak-info-nameless"
    ! sandboxed "$HOME/flatpak-info-nameless" "$py" "$here/client.py" count owner-test unconfined 2> "$HOME/nameless.log"
    grep -q AccessDenied "$HOME/nameless.log"
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

# SS_ONLY=FUNCTION runs that one case, for working on it.
if [ -n "${SS_ONLY:-}" ]; then
    check "$SS_ONLY" on_bus "$SS_ONLY"
    summary
    exit
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
check "malformed calls: InvalidArgs, NotSupported, NoSession, NoSuchObject anywhere; huge attributes; still serving" on_bus malformed_calls
check "properties, aliases, collection label, introspection" on_bus properties_and_aliases
check "CreateCollection through a prompt makes a keychain security can open; Delete removes it" on_bus create_and_delete_collection
check "Session.Close, then the session is gone" on_bus close_session
check "1,000 sessions, dropped when their client leaves the bus" on_bus thousand_sessions_dropped_with_their_client
check "the session collection: alias, never locked, not deletable, unreadable on disk, gone with the service" on_bus session_collection
check "the session collection's keychain is made by its first item, not by searches" on_bus session_keychain_made_on_first_use
check "a second provider exits naming the owner; --replace takes the name over" on_bus name_taken_and_replace
check "security lock-keychain is announced with PropertiesChanged(Locked)" on_bus lock_is_announced
check "a keychain made, a new default and a removal show at once after the folder was quiet" on_bus changes_after_a_quiet_folder_show
check "SetAlias cannot move the default keychain; the login and default keychains cannot be deleted" on_bus login_and_default_are_kept
check "Collection.Delete takes the keychain's password through a prompt, leaves no journal, spares a keychain with certificates" on_bus delete_takes_the_keychains_password
check "CreateItem(replace) with empty or fewer attributes deletes nothing of git's, docker's, security's or others" on_bus replace_touches_only_the_same_attributes
check "CreateItem(replace) changes the item in place: the same path, ItemChanged" on_bus replace_changes_the_item_in_place
check "CreateItem(replace) never passes a planted item's weaker class to the new secret" on_bus replace_never_inherits_a_weaker_class
check "another connection gets NoSuchObject for a client's prompt" on_bus foreign_prompt
check "the default keychain is known by any spelling of its path: not deleted, not moved" on_bus default_keychain_by_any_spelling
check "prompts per client capped at 8; their pinentries run one at a time" on_bus prompts_capped_and_queued
check "an item that asks for the user: AccessDenied, not IsLocked; secret-tool does not loop" on_bus presence_item_is_refused_not_locked
check "CreateItem calls sent without waiting: answered after their shared commit, a refused one alone, a search behind them sees all" on_bus pipelined_stores_answered_after_their_commit
if command -v bwrap >/dev/null; then
    check "a sandboxed app (bwrap with /.flatpak-info) sees only its own items and cannot alias, delete or lock" on_bus sandboxed_app_sees_its_own_items
    check "a sandboxed app hears of changes, not of labels or attributes" on_bus signals_tell_a_sandboxed_app_nothing
    check "a sandboxed app holds one prompt over all its connections; the dialog names it" on_bus a_sandboxed_app_holds_one_prompt
    check "a store committed by a sandboxed app's call is still announced" on_bus stores_are_announced_whoever_commits_them
    if [ "$(id -u)" = 0 ]; then
        check "a connection whose pid went to another process after the service saw it is refused" \
            pid_reuse_refused /usr/bin/dbus-daemon pid_reuse_after_the_service_saw_it
        if dbus116=$(bash "$here/dbus-1.16.sh"); then
            check "dbus 1.16: the same, the client named by the bus's ProcessFD" \
                pid_reuse_refused "$dbus116" pid_reuse_after_the_service_saw_it
            check "dbus 1.16: a connection whose pid went to another process while the service was stopped is refused" \
                pid_reuse_refused "$dbus116" pid_reuse_while_the_service_is_stopped
        else
            skip "dbus 1.16's ProcessFD: Debian 13's dbus-daemon could not be had (mmdebstrap, root, network)"
        fi
        # Without ProcessFD nothing tells the process that connected from one given its pid before
        # the service saw the connection (docs/security-model.md).
        skip "a pid reused while the service was stopped, on a bus without ProcessFD (dbus 1.14 cannot tell)"
    else
        skip "the pid-reuse cases write /proc/sys/kernel/ns_last_pid, which needs root"
    fi
else
    echo "skipped: bwrap (bubblewrap) is not installed"
fi
if [ "$(id -u)" = 0 ]; then
    check "the service is undumpable from the start" undumpable
    check "secrets of CreateItem calls stored together are wiped once answered" on_bus pipelined_secrets_are_wiped
else
    skip "the undumpable check runs the service as nobody, which needs root"
    skip "the wiping check reads the undumpable service's memory, which needs root"
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
