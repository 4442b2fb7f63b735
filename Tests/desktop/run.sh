#!/usr/bin/env bash
# Switching a desktop: keychain-secret-service enable | disable | status | import | export, and its
# xdg-desktop-portal Secret backend, against Debian's gnome-keyring-daemon filled through its own
# clients (secret-tool, python3-secretstorage, git-credential-libsecret built from git's contrib
# sources). Each case has its own HOME, XDG folders and XDG_RUNTIME_DIR, and its own session bus
# (dbus-run-session) whose service folders are the user's (~/.local/share/dbus-1/services, where
# enable writes) and a "system" one holding gnome-keyring's activation file, as on a Debian desktop.
# The systemd user units are looked for where $SYSTEMD_UNIT_PATH says (copies of gnome-keyring's
# and ours): no systemd user manager runs here, so the no-manager path is the one taken, and the
# unit files and masks enable writes are checked by reading them. Prompts are answered by
# Tests/secret-service/pinentry.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
# Inside a case's bus: run the named function of this file (see bus_suite_start).
bus_suite_start "$@"
[ -z "$inner" ] || shift 2
desktop() { "$py" "$here/desktop.py" "$@"; }
items() { "$py" "$here/../import/keyring_items.py" "$@"; }
repo=$(cd "$here/../.." && pwd)

fresh() {
    user_case_start /tmp/desktop-XXXXXX
    # The machine's gnome-keyring: its units and activation file.
    cp /usr/lib/systemd/user/gnome-keyring-daemon.service /usr/lib/systemd/user/gnome-keyring-daemon.socket "$case_dir/system/units/"
    cp /usr/share/dbus-1/services/org.freedesktop.secrets.service "$case_dir/system/services/"
}

finish() { user_case_finish; }

# on_bus FUNCTION ARGS...: FUNCTION in the case's own session bus. Whatever gnome-keyring-daemon
# the case leaves running is stopped, by its pid, when the case ends.
on_bus() { user_case_bus "$here/run.sh" "$@"; }

answers() { printf '%s\n' "$@" > "$PINENTRY_ANSWERS"; }

# Every file and folder enable may touch, with its type, mode and link target.
snapshot() { (cd "$HOME" && { find config data/dbus-1 state -printf '%p %y %m %l\n' 2>/dev/null || true; } | sort); }

owner_pid() {
    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets 2>/dev/null | awk '/uint32/ { print $2 }'
}
owner_name() { local pid; pid=$(owner_pid); [ -n "$pid" ] && basename "$(readlink "/proc/$pid/exe")"; }

wait_for_owner() {
    local _
    for _ in $(seq 100); do [ "$(owner_name)" = "$1" ] && return; sleep 0.1; done
    echo "org.freedesktop.secrets is not provided by $1 (owner: $(owner_name))"; return 1
}

# gnome-keyring-daemon in this bus, its login keyring unlocked (or created) with the login
# password as pam_gnome_keyring would; its pid in $daemon.
start_daemon() {
    printf 'login-pw' | gnome-keyring-daemon --foreground --unlock --components=secrets >> "$case_dir/daemon.log" 2>&1 &
    daemon=$!
    wait_for_owner gnome-keyring-daemon
}

# Whatever gnome-keyring-daemon owns the name now (disable starts one that is not our child).
stop_gnome_keyring() {
    local pid
    pid=$(owner_pid)
    [ -n "$pid" ] && [ "$(owner_name)" = gnome-keyring-daemon ] && kill "$pid"
    for _ in $(seq 50); do [ -z "$(owner_pid)" ] && return 0; sleep 0.1; done
}

# Our service, started by hand (the bus would start gnome-keyring for the name); its pid in $service.
start_service() {
    keychain-secret-service 2>> "$case_dir/service.log" &
    service=$!
    wait_for_owner keychain-secret-service
}

# Items stored through gnome-keyring's own clients: Chromium's key as Chromium stores it through
# libsecret, git's libsecret helper, SecretStorage (login and a Work collection), secret-tool.
fill_daemon() {
    head -c 16 /dev/urandom | base64 | tr -d '\n' > "$case_dir/chromium.key"
    secret-tool store --label='Chromium Safe Storage' xdg:schema chrome_libsecret_os_crypt_password_v2 application chromium \
        < "$case_dir/chromium.key"
    if [ -n "${LIBSECRET_HELPER:-}" ]; then
        printf 'protocol=https\nhost=git.example.com:8443\nusername=ann\npassword=git-secret\n\n' | "$LIBSECRET_HELPER" store > /dev/null
    fi
    printf 'mail-secret' | secret-tool store --label='Mail' service imap.example account ann
    desktop fill
}

# What each client finds, the same before and after the switch.
clients_find_everything() {
    expect "$(cat "$case_dir/chromium.key")" "$(secret-tool lookup xdg:schema chrome_libsecret_os_crypt_password_v2 application chromium)" \
        "Chromium's Safe Storage key"
    expect mail-secret "$(secret-tool lookup service imap.example account ann)" "secret-tool"
    if [ -n "${LIBSECRET_HELPER:-}" ]; then
        expect password=git-secret "$(printf 'protocol=https\nhost=git.example.com:8443\n\n' | "$LIBSECRET_HELPER" get | grep '^password=')" \
            "git-credential-libsecret"
    fi
    desktop dump login > "$case_dir/login.now"
    diff "$case_dir/login.before" "$case_dir/login.now"
    desktop dump Work > "$case_dir/work.now"
    diff "$case_dir/work.before" "$case_dir/work.now"
}

# --- cases (each runs inside its bus) ------------------------------------------------------

# gnome-keyring's and gcr's SSH agents: left alone for a user who has not enabled the keychain's,
# kept from starting once they have, and given back exactly by disable.
ssh_agent_enable_and_disable() {
    cp /usr/lib/systemd/user/gcr-ssh-agent.socket /usr/lib/systemd/user/gcr-ssh-agent.service "$SYSTEMD_UNIT_PATH/"
    cp "$repo/packaging/systemd/keychain-ssh-agent.socket" "$SYSTEMD_UNIT_PATH/"
    keychain-secret-service enable > "$case_dir/enable.out"
    cat "$case_dir/enable.out"
    grep -q "^keychain-ssh-agent.socket is not enabled for you: gnome-keyring's SSH agent is left as it is" "$case_dir/enable.out"
    grep -qx '  keychain-ssh-agent.socket: not enabled' <<< "$(keychain-secret-service status)"
    [ ! -e "$XDG_CONFIG_HOME/autostart/gnome-keyring-ssh.desktop" ] && [ ! -L "$XDG_CONFIG_HOME/systemd/user/gcr-ssh-agent.socket" ] ||
        { echo "gnome-keyring's SSH agent was touched for a user without the keychain's"; return 1; }
    keychain-secret-service disable > /dev/null

    mkdir -p "$XDG_CONFIG_HOME/systemd/user/sockets.target.wants"
    ln -s "$SYSTEMD_UNIT_PATH/keychain-ssh-agent.socket" "$XDG_CONFIG_HOME/systemd/user/sockets.target.wants/"
    snapshot > "$case_dir/before"
    keychain-secret-service enable > "$case_dir/enable.out"
    cat "$case_dir/enable.out"
    grep -qx 'Hidden=true' "$XDG_CONFIG_HOME/autostart/gnome-keyring-ssh.desktop"
    expect /dev/null "$(readlink "$XDG_CONFIG_HOME/systemd/user/gcr-ssh-agent.socket")" "gcr's agent socket masked"
    expect /dev/null "$(readlink "$XDG_CONFIG_HOME/systemd/user/gcr-ssh-agent.service")" "gcr's agent service masked"
    keychain-secret-service status > "$case_dir/status"
    grep -qx '  keychain-ssh-agent.socket: enabled' "$case_dir/status"
    grep -q "^  gcr-ssh-agent.socket: masked (.*, by enable)" "$case_dir/status"
    grep -q "^  gnome-keyring's SSH autostart: overridden (.*, by enable)" "$case_dir/status"
    keychain-secret-service disable > "$case_dir/disable.out"
    cat "$case_dir/disable.out"
    diff "$case_dir/before" <(snapshot)
}


enable_and_disable_files() {
    # The user's own files: an override of gnome-keyring's socket unit, another autostart entry.
    mkdir -p "$XDG_CONFIG_HOME/systemd/user" "$XDG_CONFIG_HOME/autostart"
    printf '# mine\n[Socket]\n' > "$XDG_CONFIG_HOME/systemd/user/gnome-keyring-daemon.socket"
    printf '[Desktop Entry]\nName=Mine\n' > "$XDG_CONFIG_HOME/autostart/mine.desktop"
    snapshot > "$case_dir/before"
    keychain-secret-service enable > "$case_dir/enable.out"
    cat "$case_dir/enable.out"
    grep -q '^no systemd user manager runs for you' "$case_dir/enable.out"
    grep -q "gnome-keyring-daemon.socket is yours (not written by enable): left as it is" "$case_dir/enable.out"
    # What enable wrote, exactly.
    grep -qx 'Hidden=true' "$XDG_CONFIG_HOME/autostart/gnome-keyring-secrets.desktop"
    expect /dev/null "$(readlink "$XDG_CONFIG_HOME/systemd/user/gnome-keyring-daemon.service")" "gnome-keyring's service unit masked"
    expect '# mine' "$(head -1 "$XDG_CONFIG_HOME/systemd/user/gnome-keyring-daemon.socket")" "the user's own unit file"
    expect "$SYSTEMD_UNIT_PATH/keychain-secret-service.service" \
        "$(readlink "$XDG_CONFIG_HOME/systemd/user/graphical-session-pre.target.wants/keychain-secret-service.service")" \
        "our unit enabled for the graphical session, as systemctl enable links it"
    grep -qx "Exec=$bin/keychain-secret-service" "$XDG_DATA_HOME/dbus-1/services/org.freedesktop.secrets.service"
    grep -qx 'SystemdService=keychain-secret-service.service' "$XDG_DATA_HOME/dbus-1/services/org.freedesktop.secrets.service"
    {
        cat "$case_dir/before"
        cat <<EOF
config/autostart/gnome-keyring-secrets.desktop f 644 
config/systemd/user/gnome-keyring-daemon.service l 777 /dev/null
config/systemd/user/graphical-session-pre.target.wants d 700 
config/systemd/user/graphical-session-pre.target.wants/keychain-secret-service.service l 777 $SYSTEMD_UNIT_PATH/keychain-secret-service.service
data/dbus-1 d 700 
data/dbus-1/services d 700 
data/dbus-1/services/org.freedesktop.secrets.service f 644 
state d 700 
state/keychain d 700 
state/keychain/secret-service-enabled f 600 
EOF
    } | sort > "$case_dir/expected"
    diff "$case_dir/expected" <(snapshot)
    # The bus now starts this service for the name, not gnome-keyring.
    wait_for_owner keychain-secret-service
    keychain-secret-service status > "$case_dir/status"
    cat "$case_dir/status"
    grep -q "^org.freedesktop.secrets: keychain-secret-service (pid [0-9]*, uid $(id -u)), since 20" "$case_dir/status"
    grep -q '^enabled: yes, since 20' "$case_dir/status"
    grep -q "gnome-keyring-daemon.service: masked (.*, by enable)" "$case_dir/status"
    grep -q "gnome-keyring's secrets autostart: hidden (.*, by enable)" "$case_dir/status"
    grep -q 'systemd user manager: not running' "$case_dir/status"
    # A second enable adds nothing; disable then removes exactly what enable wrote.
    keychain-secret-service enable > "$case_dir/enable.out"
    expect 1 "$(grep -c '^file ' "$XDG_STATE_HOME/keychain/secret-service-enabled" | awk '{print ($1 == 2)}')" "two files recorded, once each"
    keychain-secret-service disable > "$case_dir/disable.out"
    cat "$case_dir/disable.out"
    diff "$case_dir/before" <(snapshot)
    for _ in $(seq 50); do [ -z "$(owner_pid)" ] && break; sleep 0.1; done
    expect "" "$(owner_pid)" "the name is given up"
    grep -qx 'enabled: no' <<< "$(keychain-secret-service status)"
    # Nothing to undo now.
    grep -q 'not enabled' <<< "$(keychain-secret-service disable)"
}

changed_files_are_left_alone() {
    snapshot > "$case_dir/before"
    keychain-secret-service enable > /dev/null
    printf 'X-Mine=true\n' >> "$XDG_CONFIG_HOME/autostart/gnome-keyring-secrets.desktop"
    ln -sfn /usr/lib/systemd/user/gnome-keyring-daemon.service "$XDG_CONFIG_HOME/systemd/user/gnome-keyring-daemon.service"
    keychain-secret-service disable > "$case_dir/disable.out"
    cat "$case_dir/disable.out"
    grep -q 'gnome-keyring-secrets.desktop changed since enable wrote it: left as it is' "$case_dir/disable.out"
    grep -q 'gnome-keyring-daemon.service now points at /usr/lib/systemd/user/gnome-keyring-daemon.service' "$case_dir/disable.out"
    grep -qx 'X-Mine=true' "$XDG_CONFIG_HOME/autostart/gnome-keyring-secrets.desktop"
    [ ! -e "$XDG_DATA_HOME/dbus-1/services/org.freedesktop.secrets.service" ]
    [ ! -e "$XDG_CONFIG_HOME/systemd/user/graphical-session-pre.target.wants" ]
}

hand_over_from_gnome_keyring() {
    start_daemon
    fill_daemon
    # A Flatpak app's portal secret, as gnome-keyring's own portal backend makes it.
    mkdir -p "$HOME/.var/app/org.example.Chat"
    chat=$(desktop portal org.example.Chat)
    [[ "$chat" =~ ^0\ [0-9a-f]{128}$ ]] || { echo "gnome-keyring's portal: $chat"; return 1; }
    desktop dump login > "$case_dir/login.before"
    desktop dump Work > "$case_dir/work.before"
    expect 5 "$(wc -l < "$case_dir/login.before")" "items gnome-keyring serves in login"
    snapshot > "$case_dir/files.before"
    # The login keychain and Work are new: their passwords through pinentry.
    answers login-pw work-new
    started=$(date +%s%N)
    keychain-secret-service enable > "$case_dir/enable.out"
    took=$((($(date +%s%N) - started) / 1000000))
    cat "$case_dir/enable.out"
    echo "enable took $took ms"
    [ "$took" -lt 10000 ]
    grep -q "^importing the secrets of gnome-keyring-daemon (pid $daemon) first" "$case_dir/enable.out"
    grep -q "^import: 7 added, 0 already there, 1 skipped$" "$case_dir/enable.out"
    grep -q "^stopped gnome-keyring-daemon (pid $daemon), after its secrets were imported" "$case_dir/enable.out"
    wait "$daemon" 2>/dev/null || true
    ! kill -0 "$daemon" 2>/dev/null
    wait_for_owner keychain-secret-service
    # Every client finds what it stored, through the keychain now.
    clients_find_everything
    expect "$chat" "$(desktop portal org.example.Chat)" "the Flatpak app's portal secret, the same after the switch"
    expect git-secret "$(printf 'protocol=https\nhost=git.example.com:8443\n\n' | git-credential-keychain get | sed -n 's/^password=//p')" \
        "git-credential-keychain finds what git's libsecret helper stored in gnome-keyring"
    # disable: the files as they were, gnome-keyring back for the name.
    keychain-secret-service disable > "$case_dir/disable.out"
    cat "$case_dir/disable.out"
    wait_for_owner gnome-keyring-daemon
    diff "$case_dir/files.before" <(snapshot)
    grep -q '^org.freedesktop.secrets: gnome-keyring-daemon (pid' <<< "$(keychain-secret-service status)"
    # Its keyrings are as it left them: unlocked with the login password, it serves them again.
    items unlock login login-pw
    expect mail-secret "$(secret-tool lookup service imap.example account ann)" "gnome-keyring serves its own items again"
    stop_gnome_keyring
}

locked_collection_changes_nothing() {
    start_daemon
    fill_daemon
    kill "$daemon"; wait "$daemon" 2>/dev/null || true
    # At the next start, login is unlocked with the login password, Work stays locked; its
    # prompt (gnome-keyring's own dialog) cannot be shown here, so it is dismissed.
    start_daemon
    snapshot > "$case_dir/files.before"
    answers login-pw
    if keychain-secret-service enable > "$case_dir/enable.out" 2>&1; then cat "$case_dir/enable.out"; echo "enable succeeded"; return 1; fi
    cat "$case_dir/enable.out"
    grep -q '“Work”: locked, and its unlock prompt was dismissed; nothing of it came' "$case_dir/enable.out"
    grep -q 'nothing else was changed, and it still serves' "$case_dir/enable.out"
    diff "$case_dir/files.before" <(snapshot)
    kill -0 "$daemon"
    wait_for_owner gnome-keyring-daemon
    [ ! -e "$XDG_STATE_HOME/keychain/secret-service-enabled" ]
    kill "$daemon"
}

import_twice_then_every_client() {
    start_daemon
    fill_daemon
    desktop dump login > "$case_dir/login.before"
    desktop dump Work > "$case_dir/work.before"
    # A dry run lists and changes nothing.
    keychain-secret-service import --dry-run > "$case_dir/dry.out"
    cat "$case_dir/dry.out"
    grep -q '^would create  keychain .*/login.keychain-db$' "$case_dir/dry.out"
    grep -q '^would add     gnome-keyring-daemon.s “Work”: “VPN”$' "$case_dir/dry.out"
    expect "import: dry run: 6 would be added, 0 already there; nothing was changed" "$(tail -1 "$case_dir/dry.out")"
    [ ! -e "$XDG_DATA_HOME/keychains" ]
    answers login-pw work-new
    keychain-secret-service import > "$case_dir/import.out"
    expect "import: 6 added, 0 already there" "$(tail -1 "$case_dir/import.out")"
    expect Work "$(security list-keychains | grep -c Work.keychain-db | sed 's/1/Work/')" "Work became a keychain"
    expect vpn-pw "$(security find-generic-password -s vpn.example -a ann -w Work)"
    before=$(security dump-keychain 2>/dev/null | sha256sum; security dump-keychain Work 2>/dev/null | sha256sum)
    # Again: nothing added, nothing changed.
    keychain-secret-service import > "$case_dir/import.out"
    expect "import: 0 added, 6 already there" "$(tail -1 "$case_dir/import.out")"
    expect "$before" "$(security dump-keychain 2>/dev/null | sha256sum; security dump-keychain Work 2>/dev/null | sha256sum)" "the keychains are unchanged"
    # The switch by hand: gnome-keyring stopped, this service for the name; every client finds
    # what it stored, the secrets' content types kept.
    kill "$daemon"; wait "$daemon" 2>/dev/null || true
    start_service
    clients_find_everything
    kill "$service"
}

# A collection is stored in one transaction: one whose commit fails (a trigger planted in its
# keychain undoes the whole transaction at the collection's second item) brings none of its items,
# says so, and the other collection still comes whole.
collection_comes_whole_or_not_at_all() {
    start_daemon
    fill_daemon
    printf 'login-pw\n' | security create-keychain > /dev/null
    local login=$XDG_DATA_HOME/keychains/login.keychain-db before
    before=$(sqlite3 "$login" 'SELECT count(*) FROM items')
    sqlite3 "$login" "CREATE TRIGGER planted AFTER INSERT ON items WHEN (SELECT count(*) FROM items) >= $before + 2
        BEGIN SELECT RAISE(ROLLBACK, 'planted failure'); END"
    answers work-new
    keychain-secret-service import > "$case_dir/import.out" 2>&1 && { cat "$case_dir/import.out"; echo "the import succeeded"; return 1; }
    grep -q '“Login” -> .*login.keychain-db: nothing of it was stored' "$case_dir/import.out" || { cat "$case_dir/import.out"; return 1; }
    # One line says what failed, with its cause; the items after it are not tried.
    expect 1 "$(grep -c '“Login”: .*: planted failure' "$case_dir/import.out")" "the failing item, with SQLite's reason"
    expect 0 "$(grep -c '“Login”: .*rolled back' "$case_dir/import.out")" "no line for the items after it"
    grep -q '^import: 1 added, 0 already there, [0-9]* could not come$' "$case_dir/import.out" || { cat "$case_dir/import.out"; return 1; }
    expect "$before" "$(sqlite3 "$login" 'SELECT count(*) FROM items')" "no item of the login collection stored"
    expect vpn-pw "$(security find-generic-password -s vpn.example -a ann -w Work)" "Work came whole"
    kill "$daemon"
}

export_back_to_gnome_keyring() {
    printf 'login-pw\n' | security create-keychain > /dev/null
    start_service
    printf 'through-us' | secret-tool store --label='Stored here' service new.example account ann
    printf 'protocol=https\nhost=git.example.org\nusername=bob\npassword=git-here\n\n' | git-credential-keychain store
    security add-generic-password -s cli.example -a carol -w cli-here
    mkdir -p "$HOME/.var/app/org.example.Chat"
    chat=$(desktop portal org.example.Chat)
    kill "$service"; wait "$service" 2>/dev/null || true
    start_daemon
    keychain-secret-service export --to org.freedesktop.secrets --dry-run > "$case_dir/dry.out"
    cat "$case_dir/dry.out"
    expect "export: dry run: 4 would be added, 0 already there; nothing was changed" "$(tail -1 "$case_dir/dry.out")"
    ! secret-tool lookup service new.example
    keychain-secret-service export --to org.freedesktop.secrets > "$case_dir/export.out"
    cat "$case_dir/export.out"
    expect "export: 4 added, 0 already there" "$(tail -1 "$case_dir/export.out")"
    expect through-us "$(secret-tool lookup service new.example account ann)" "secret-tool, through gnome-keyring"
    expect cli-here "$(secret-tool lookup service cli.example account carol)" "what security stored"
    expect git-here "$(secret-tool lookup server git.example.org user bob)" "git's credential, with network-password attributes"
    # gnome-keyring's own portal finds the app's secret under the same app_id.
    expect "$chat" "$(desktop portal org.example.Chat)" "the app's portal secret, through gnome-keyring's portal"
    keychain-secret-service export --to org.freedesktop.secrets --dry-run > "$case_dir/export.out"
    cat "$case_dir/export.out"
    expect "export: dry run: 0 would be added, 4 already there; nothing was changed" "$(tail -1 "$case_dir/export.out")"
    kill "$daemon"
}

# Another provider (this program serving another HOME's keychains, which keeps content types):
# a locked collection is unlocked through that provider's own prompt; labels, attributes,
# secrets, content types and dates come as it served them.
import_through_the_providers_prompt() {
    local source=$case_dir/source
    mkdir -p "$source"
    HOME=$source XDG_DATA_HOME=$source/data XDG_CONFIG_HOME=$source/config sh -c '
        printf "source-pw\n" | security create-keychain > /dev/null
        printf "vault-pw\n" | security create-keychain Vault > /dev/null
        security lock-keychain Vault'
    HOME=$source XDG_DATA_HOME=$source/data XDG_CONFIG_HOME=$source/config keychain-secret-service 2>> "$case_dir/source.log" &
    provider=$!
    wait_for_owner keychain-secret-service
    "$py" -c '
import secretstorage
c = secretstorage.dbus_init()
login = secretstorage.Collection(c, "/org/freedesktop/secrets/collection/login")
login.create_item("Blob", {"app": "blob"}, b"\x01\x02\x03", content_type="application/octet-stream")
login.create_item("Note", {"app": "note", "kind": "text"}, b"plain words")'
    answers vault-pw
    "$py" -c '
import secretstorage
c = secretstorage.dbus_init()
vault = secretstorage.Collection(c, "/org/freedesktop/secrets/collection/Vault")
vault.unlock()
vault.create_item("Safe", {"app": "safe"}, b"in the vault")'
    desktop dump login > "$case_dir/login.before"
    desktop dump Vault > "$case_dir/vault.before"
    HOME=$source XDG_DATA_HOME=$source/data XDG_CONFIG_HOME=$source/config security lock-keychain Vault
    # Without --from, another keychain-secret-service is taken for this one: nothing to import.
    grep -q 'nothing to import' <<< "$(keychain-secret-service import 2>&1)"
    # The new login keychain's password (here), Vault's own (the provider's prompt), the new Vault's.
    answers home-pw vault-pw vault-new
    keychain-secret-service import --from org.freedesktop.secrets > "$case_dir/import.out"
    cat "$case_dir/import.out"
    expect "import: 3 added, 0 already there" "$(tail -1 "$case_dir/import.out")"
    grep -q "^SETDESC .*Vault.*Enter its password to unlock it" "$PINENTRY_LOG"
    kill "$provider"; wait "$provider" 2>/dev/null || true
    start_service
    desktop dump login | diff "$case_dir/login.before" -
    desktop dump Vault | diff "$case_dir/vault.before" -
    "$py" -c '
import secretstorage
c = secretstorage.dbus_init()
blob = next(secretstorage.search_items(c, {"app": "blob"}))
assert blob.get_secret_content_type() == "application/octet-stream", blob.get_secret_content_type()
note = next(secretstorage.search_items(c, {"app": "note"}))
assert note.get_secret_content_type() == "text/plain", note.get_secret_content_type()'
    kill "$service"
}

# gnome-keyring's look-alikes (one attribute set, a secret each) come over D-Bus in time linear in
# their number: each "already there?" is a look-up in the import's own index, not a read of every
# earlier look-alike. 2,000 of them took minutes before; the bound leaves ten times the work.
import_of_look_alikes_is_linear() {
    mkdir -p "$XDG_DATA_HOME/keyrings"
    "$py" "$here/../stress/keyring_file.py" "$XDG_DATA_HOME/keyrings/login.keyring" 2000 login-pw --shared > /dev/null
    start_daemon
    answers login-pw
    timeout 90 keychain-secret-service import > "$case_dir/import.out" 2>&1 || { tail -3 "$case_dir/import.out"; return 1; }
    expect "import: 2000 added, 0 already there" "$(tail -1 "$case_dir/import.out")"
    timeout 90 keychain-secret-service import > "$case_dir/import.out" 2>&1 || { tail -3 "$case_dir/import.out"; return 1; }
    expect "import: 0 added, 2000 already there" "$(tail -1 "$case_dir/import.out")"
    expect 2000 "$(security dump-keychain 2>/dev/null | grep -c '^class: "genp"')" "every look-alike, once"
}

portal_secret_per_app() {
    printf 'pw\n' | security create-keychain > /dev/null
    start_service
    a=$(desktop portal org.example.A)
    [[ "$a" =~ ^0\ [0-9a-f]{128}$ ]] || { echo "RetrieveSecret: $a"; return 1; }
    expect "$a" "$(desktop portal org.example.A)" "the same app, again"
    b=$(desktop portal org.example.B)
    [[ "$b" =~ ^0\ [0-9a-f]{128}$ ]] && [ "$b" != "$a" ] || { echo "another app: $b"; return 1; }
    # Kept as the app's own items: no unconfined search finds them.
    expect 1 "$(security dump-keychain | grep -cx '    "ssow"<blob>="org.example.A"')" "the item of org.example.A"
    ! secret-tool lookup app_id org.example.A
    # Across a restart of the service.
    kill "$service"; wait "$service" 2>/dev/null || true
    start_service
    expect "$a" "$(desktop portal org.example.A)" "the same app after a restart"
    # A sandboxed app cannot ask in the portal's place (it could name another app).
    printf '[Application]\nname=org.example.B\n' > "$case_dir/flatpak-info"
    out=$(bwrap --tmpfs / --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
        --symlink usr/sbin /sbin --ro-bind /etc /etc --proc /proc --dev /dev --bind /tmp /tmp --ro-bind "$here" "$here" \
        --ro-bind "$case_dir/flatpak-info" /.flatpak-info --setenv DBUS_SESSION_BUS_ADDRESS "$DBUS_SESSION_BUS_ADDRESS" \
        --unsetenv XDG_RUNTIME_DIR --chdir / -- "$py" "$here/desktop.py" portal org.example.A) && { echo "a sandbox was answered: $out"; return 1; }
    expect "error org.freedesktop.DBus.Error.AccessDenied" "$out" "a sandboxed caller"
    # Locked, and the prompt dismissed: nothing written, response 1 (cancelled).
    security lock-keychain
    answers CANCEL
    expect "1 " "$(desktop portal org.example.A)" "a dismissed unlock prompt"
    grep -q "SETDESC .*org.example.A" "$PINENTRY_LOG"
    answers pw
    expect "$a" "$(desktop portal org.example.A)" "unlocked through the prompt"
    kill "$service"
}

# Debian 12's own xdg-desktop-portal (1.16, which refuses a .portal file without UseIn) offers the
# keychain's backend from its installed file alone, and a sandboxed app's RetrieveSecret through it
# gets the secret the backend keeps for the app id of its /.flatpak-info.
real_portal_serves_a_sandboxed_app() {
    printf 'pw\n' | security create-keychain > /dev/null
    start_service
    mkdir -p "$case_dir/portals"
    cp "$repo/Sources/keychain-secret-service/dbus/keychain.portal" "$case_dir/portals/"
    # KDE: a desktop gnome-keyring's own .portal file (UseIn=gnome) is not for, and it is not in this folder.
    XDG_DESKTOP_PORTAL_DIR=$case_dir/portals XDG_CURRENT_DESKTOP=KDE /usr/libexec/xdg-desktop-portal --verbose > "$case_dir/xdp.log" 2>&1 &
    xdp=$!
    local _
    # This process (the case's inner bash) ends it however the case ends.
    trap 'kill "$xdp" 2>/dev/null || :' EXIT
    for _ in $(seq 100); do
        dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner \
            string:org.freedesktop.portal.Desktop 2>/dev/null | grep -q 'boolean true' && break
        sleep 0.1
    done
    printf '[Application]\nname=org.example.A\n\n[Instance]\ninstance-id=1234567890\n' > "$case_dir/flatpak-info"
    out=$(bwrap --tmpfs / --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
        --symlink usr/sbin /sbin --ro-bind /etc /etc --proc /proc --dev /dev --bind /tmp /tmp --ro-bind "$here" "$here" \
        --ro-bind "$case_dir/flatpak-info" /.flatpak-info --setenv DBUS_SESSION_BUS_ADDRESS "$DBUS_SESSION_BUS_ADDRESS" \
        --unsetenv XDG_RUNTIME_DIR --chdir / -- "$py" "$here/desktop.py" portal-app) || { echo "$out"; grep -i -e secret -e portal "$case_dir/xdp.log" | head -20; return 1; }
    [[ "$out" =~ ^0\ [0-9a-f]{128}$ ]] || { echo "RetrieveSecret through xdg-desktop-portal: $out"; return 1; }
    expect "$(desktop portal org.example.A)" "$out" "the secret the backend keeps for org.example.A"
    [ "$out" != "$(desktop portal org.example.B)" ]
    kill "$xdp"
    kill "$service"
}

# chromium_site: a page that sets a cookie (set.html) and one that shows it (get.html), served on
# 127.0.0.1 for two minutes at most ($web its server, $port its port), and browse PAGE PREFIX:
# what headless Chromium, its keys in the Secret Service, shows of PAGE from PREFIX on.
chromium_site() {
    mkdir -p "$case_dir/www"
    printf '<html><body><script>document.cookie = "kept=yes-%s; path=/; max-age=86400"; document.body.textContent = "set:" + document.cookie;</script></body></html>' \
        "$$" > "$case_dir/www/set.html"
    printf '<html><body><script>document.body.textContent = "cookie:" + document.cookie;</script></body></html>' > "$case_dir/www/get.html"
    "$py" -c '
import functools, http.server, sys, time
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.HTTPServer(("127.0.0.1", 0), handler)
print(server.server_address[1], flush=True)
server.timeout = 1
deadline = time.time() + 120
while time.time() < deadline:
    server.handle_request()' "$case_dir/www" > "$case_dir/port" 2> /dev/null &
    web=$!
    for _ in $(seq 50); do [ -s "$case_dir/port" ] && break; sleep 0.1; done
    port=$(cat "$case_dir/port")
}

browse() {
    timeout 60 chromium --headless=new --no-sandbox --password-store=gnome-libsecret --user-data-dir="$case_dir/profile" \
        --no-first-run --disable-gpu --dump-dom "http://127.0.0.1:$port/$1" 2>> "$case_dir/chromium.log" | grep -o "$2[^<]*"
}

# Chromium keeps one key in the Secret Service ("Chromium Safe Storage") and encrypts its cookies
# and saved passwords with it: after the switch it must find the same key, or what it kept is lost.
chromium_keeps_its_cookie() {
    start_daemon
    chromium_site
    expect "set:kept=yes-$$" "$(browse set.html set:)" "the cookie Chromium set"
    key=$(secret-tool lookup xdg:schema chrome_libsecret_os_crypt_password_v2 application chromium)
    [ -n "$key" ] || { echo "Chromium stored no key in gnome-keyring"; return 1; }
    # Kept encrypted under that key (v11: the key from the Secret Service).
    expect 763131 "$(sqlite3 "$case_dir/profile/Default/Cookies" "select substr(hex(encrypted_value), 1, 6) from cookies where name = 'kept'")" \
        "the cookie, encrypted with the Safe Storage key"
    answers login-pw
    keychain-secret-service enable > "$case_dir/enable.out"
    wait_for_owner keychain-secret-service
    ! kill -0 "$daemon" 2>/dev/null
    expect "$key" "$(secret-tool lookup xdg:schema chrome_libsecret_os_crypt_password_v2 application chromium)" "the key, from the keychain"
    expect "cookie:kept=yes-$$" "$(browse get.html cookie:)" "Chromium reads the cookie it set before the switch"
    kill "$web"
}

# --- a broker keeping the keychain: the service relays its clients (issue 55) ---------------

# The service as the broker's deputy: the suite's copy (in a folder of root's under /run, so that
# the broker identifies it), asking through the stand-in answerer; its pid in $service. The
# clients are the machine's own (/usr/bin/secret-tool, python3, chromium).
# start_brokered_service [PREFIX...]: the service, run through PREFIX (a command and its options).
start_brokered_service() {
    export KEYCHAIN_BROKER_SOCKET=$broker_socket KEYCHAIN_ACCESS_ANSWERER=$broker_dir/bin/answer
    printf 'pw\n' | security create-keychain > /dev/null
    "$@" "$broker_dir/bin/keychain-secret-service" 2>> "$case_dir/service.log" &
    service=$!
    wait_for_owner keychain-secret-service
}

# answer_with MODE: the stand-in's next answers (deny, once, always), no question asked yet.
answer_with() { echo "$1" > "$broker_dir/answer.mode"; rm -f "$broker_dir/questions"; }
not_asked() { [ ! -e "$broker_dir/questions" ] || { echo "asked:"; cat "$broker_dir/questions"; return 1; }; }

# The brokered service holding what a program stores, trusting that program only: "Tool item"
# (app=tool, tool-secret) by secret-tool and "Python item" (app=py, py-secret) by SecretStorage
# (python3, by its interpreter entry), each read back by its own program with no question.
# The stand-in then denies.
brokered_items_stored() {
    start_brokered_service
    answer_with deny
    printf 'tool-secret' | secret-tool store --label='Tool item' app tool
    desktop store 'Python item' app=py py-secret
    expect tool-secret "$(secret-tool lookup app tool)" "secret-tool reads what it stored"
    expect py-secret "$(desktop read app=py)" "SecretStorage reads what it stored"
    not_asked
    security find-generic-password -l 'Tool item' --access | grep -qx '    entry 0: exe:/usr/bin/secret-tool'
    security find-generic-password -l 'Python item' --access | grep -qx "    entry 0: interpreter:$(realpath "$py")"
}

# secret-tool and SecretStorage read each other's items only once the person says so; deny fails
# the call with no secret; "always" puts the reader on the list; `security access --revoke`
# takes it off again.
brokered_clients_are_asked() {
    local out portal_secret
    brokered_items_stored
    out=$(secret-tool lookup app py 2>&1) && { echo "secret-tool read python's item: $out"; return 1; }
    [[ $out != *py-secret* ]]
    grep -F "secret-tool (/usr/bin/secret-tool)" "$broker_dir/questions"
    grep -F '"Python item"' "$broker_dir/questions"
    grep -F "through keychain-secret-service" "$broker_dir/questions"
    answer_with once
    grep -qx 'secret = py-secret' <<< "$(secret-tool search --all --unlock app py 2>&1)"
    grep -F '"Python item"' "$broker_dir/questions"
    answer_with deny
    if desktop read app=tool; then echo "SecretStorage read secret-tool's item"; return 1; fi
    grep -F '"Tool item"' "$broker_dir/questions"
    grep -F "python3" "$broker_dir/questions"

    answer_with always
    expect py-secret "$(secret-tool lookup app py)" "allowed always"
    [ -e "$broker_dir/questions" ]
    answer_with deny
    expect py-secret "$(secret-tool lookup app py)" "then on the list"
    not_asked

    # (Two refusals of secret-tool so far: a third within the minute would not be asked, QuestionLimit.)
    # The portal backend keeps its own rules: an app's secret, the same each time, no question.
    answer_with deny
    portal_secret=$(desktop portal org.example.A)
    [[ "$portal_secret" =~ ^0\ [0-9a-f]{128}$ ]] || { echo "RetrieveSecret: $portal_secret"; return 1; }
    expect "$portal_secret" "$(desktop portal org.example.A)" "the app's portal secret, again"
    not_asked

    answer_with once
    security access --program /usr/bin/secret-tool --revoke > /dev/null
    answer_with once
    expect py-secret "$(secret-tool lookup app py)" "allowed once, after the revoke"
    grep -F '"Python item"' "$broker_dir/questions"
    kill "$service"
    wait "$service" 2> /dev/null || :

    # Nobody to ask (no answerer, no desktop, and the machine's pinentry has no terminal to show
    # itself on): AccessDenied, no secret.
    env -u KEYCHAIN_ACCESS_ANSWERER -u DISPLAY -u WAYLAND_DISPLAY -u GPG_TTY KEYCHAIN_PINENTRY=/nonexistent \
        "$broker_dir/bin/keychain-secret-service" < /dev/null 2>> "$case_dir/service.log" &
    service=$!
    wait_for_owner keychain-secret-service
    out=$(timeout 60 secret-tool lookup app py 2>&1) && { echo "read with nobody to ask: $out"; return 1; }
    grep -F "AccessDenied" <<< "$(timeout 60 "$py" "$here/desktop.py" read app=tool 2>&1)"
    kill "$service"
}

# dbus-python (`import dbus`, the API spoken directly) is python3 too: SecretStorage's item is
# its own, secret-tool's is asked about, through the item's GetSecret and the service's
# GetSecrets alike. An interpreter runs whatever script it is given, so "always allow" gives it
# that read only; `security access --grant --interpreter` is the person's way to trust it, and
# --program --revoke takes that back. A refused GetSecrets fails whole with AccessDenied: it does
# not leave the item out, as it does a locked one, which would read as "no such secret".
brokered_dbus_python_is_asked() {
    local out python
    python=$(realpath "$py")
    brokered_items_stored
    expect py-secret "$(desktop dbus-read item app=py)" "GetSecret of SecretStorage's item"
    expect py-secret "$(desktop dbus-read service app=py)" "GetSecrets of SecretStorage's item"
    not_asked

    answer_with always
    expect tool-secret "$(desktop dbus-read item app=tool)" "secret-tool's item, allowed"
    grep -F "that is ${python##*/} ($python: interpreter)" "$broker_dir/questions"
    grep -F 'wants to read "Tool item"' "$broker_dir/questions"
    grep -F "through keychain-secret-service" "$broker_dir/questions"
    grep -F "it can be allowed once only" "$broker_dir/questions"
    answer_with once
    expect tool-secret "$(desktop dbus-read service app=tool)" "GetSecrets, asked again"
    grep -F 'wants to read "Tool item"' "$broker_dir/questions"

    # security's change is asked about as a read is: allowed once.
    answer_with once
    security access -l 'Tool item' --grant "$python" --interpreter > /dev/null
    security find-generic-password -l 'Tool item' --access | grep -qx "    entry 1: interpreter:$python"
    answer_with deny
    expect tool-secret "$(desktop dbus-read item app=tool)" "GetSecret, the interpreter on the list"
    expect tool-secret "$(desktop dbus-read service app=tool)" "GetSecrets, the interpreter on the list"
    not_asked

    # The refusals last: python3 was refused in the case before, and a third refusal within the
    # minute leaves it unasked (QuestionLimit). The revoke takes python3 off SecretStorage's item
    # too: put back there, that item is read before the refused one in GetSecrets, and its
    # secret must not come out either.
    answer_with once
    security access --program "$python" --revoke > /dev/null
    security access -l 'Python item' --grant "$python" --interpreter > /dev/null
    answer_with deny
    out=$(desktop dbus-read item app=tool 2>&1) && { echo "GetSecret after the revoke and a deny: $out"; return 1; }
    expect "error: org.freedesktop.DBus.Error.AccessDenied" "$out" "GetSecret, denied"
    grep -F 'wants to read "Tool item"' "$broker_dir/questions"
    answer_with deny
    out=$(desktop dbus-read service app=py app=tool 2>&1) && { echo "GetSecrets after the revoke and a deny: $out"; return 1; }
    expect "error: org.freedesktop.DBus.Error.AccessDenied" "$out" "GetSecrets, denied"
    expect 1 "$(grep -c 'wants to read' "$broker_dir/questions")" "one question, about secret-tool's item"
    grep -F 'wants to read "Tool item"' "$broker_dir/questions"
    kill "$service"
}

# The login collection's Locked property, as a client reads it: true or false.
collection_locked() {
    dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets/collection/login \
        org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Collection string:Locked | awk '/boolean/ { print $3 }'
}

# The service keeps the state the broker last gave it while the broker tells no change (its
# notices), and asks no more for the lock status or a search: a lock made by another process
# must still show at the service's very next call, and an unlock too.
brokered_lock_elsewhere_is_seen_at_once() {
    start_brokered_service
    answer_with deny
    printf 'tool-secret' | secret-tool store --label='Tool item' app tool
    expect tool-secret "$(secret-tool lookup app tool)" "before the lock"
    grep -qx 'attribute.app = tool' <<< "$(secret-tool search app tool 2>&1)"
    expect false "$(collection_locked)" "unlocked"
    security lock-keychain
    expect true "$(collection_locked)" "the lock made elsewhere, at the next call"
    if secret-tool search app tool 2>&1 | grep -x 'attribute.app = tool'; then echo "a search after the lock read the attributes"; return 1; fi
    security unlock-keychain -p pw
    expect false "$(collection_locked)" "the unlock made elsewhere, at the next call"
    grep -qx 'attribute.app = tool' <<< "$(secret-tool search app tool 2>&1)"
    expect tool-secret "$(secret-tool lookup app tool)" "after the unlock"
    not_asked
    kill "$service"
}

# vault_read_after_exec [SCRIPT-OPTION] [PREFIX...]: a "Vault item" that trusts /usr/bin/sleep
# only, then exec_after_connect.py (with SCRIPT-OPTION, run through PREFIX, as the service and the
# item's store are) reading it; fails if the script got its secret. The stand-in would deny.
vault_read_after_exec() {
    local out option=${1:-}
    [ $# = 0 ] || shift
    start_brokered_service "$@"
    answer_with once
    printf 'vault-secret' | "$@" secret-tool store --label='Vault item' app vault
    security set-generic-password-partition-list -l 'Vault item' -S exe:/usr/bin/sleep -k pw > /dev/null
    security find-generic-password -l 'Vault item' --access | grep -qx '    entry 0: exe:/usr/bin/sleep'
    answer_with deny
    # (timeout's child is the process that became sleep, killed by the script: its status is 137.)
    out=$(timeout 60 "$@" "$py" "$here/exec_after_connect.py" ${option:+"$option"} app=vault /usr/bin/sleep 30) || :
    echo "the script got: $out"
    security access-log | grep -F "Vault item" | tail -1 || :
    [[ $out != *vault-secret* ]] || { echo "it read the item as sleep, unasked"; return 1; }
    kill "$service"
}

# Review 55 (an attack): the bus names the process that made a connection, not the one that sends
# on it. A script connects, forks, and the connecting process execs a program the item trusts
# (here /usr/bin/sleep, standing for one that gives its secrets to nobody: a browser, a mail
# client); the child asks on the same connection. The script must get nothing.
brokered_exec_after_connect_is_not_the_trusted_program() { vault_read_after_exec; }

# The same, once the service has looked at the script (its first read, refused): the process it
# holds by a pidfd then runs the trusted program, and is not taken for the asker either.
brokered_exec_after_a_first_read_is_not_the_trusted_program() { vault_read_after_exec --read-first; }

# The same with the connection's descriptor let through the exec (so the trusted program holds
# the bus socket) and the child undumpable (so its own descriptors cannot be read, and nobody is
# seen sharing the socket): a descriptor that came through an exec is not close-on-exec, which
# bus libraries always set. The suite runs as root, who reads any process's descriptors; the
# service, as it runs for a user, may not read those of an undumpable process: without
# CAP_SYS_PTRACE, neither may root. Its clients go without it too (a process with capabilities
# the service lacks is not its to look into).
brokered_exec_with_the_connection_inherited_is_not_the_trusted_program() {
    vault_read_after_exec --inherit-hidden setpriv --bounding-set=-sys_ptrace --
}

# Review 55 (an attack): the Secret Service's bus name is any process's of the user to take (the
# service allows replacement, and could be killed anyway). The taker then receives what clients
# store: here secret-tool's new password, as git-credential-libsecret's after a login, or
# Chromium's key at its first start. The service must not give its name up to it.
brokered_name_taken_over_gets_what_clients_store() {
    local out
    start_brokered_service
    "$py" "$here/name_squatter.py" "$case_dir/caught" &
    local squatter=$!
    for _ in $(seq 100); do [ -s "$case_dir/caught.ready" ] && break; sleep 0.1; done
    cat "$case_dir/caught.ready"
    printf 'fresh-password' | timeout 30 secret-tool store --label='New login' app newlogin || :
    kill "$squatter"
    out=$(cat "$case_dir/caught" 2> /dev/null || :)
    echo "the squatter caught: $out"
    kill "$service" 2> /dev/null || :
    [[ $out != *fresh-password* ]] || { echo "a process of the user took the name and the new password"; return 1; }
}

# Chromium stores its Safe Storage key through the service and reads it back with no question:
# the key trusts Chromium's own executable.
brokered_chromium_keeps_its_key() {
    start_brokered_service
    answer_with deny
    chromium_site
    expect "set:kept=yes-$$" "$(browse set.html set:)" "the cookie Chromium set"
    security find-generic-password -l 'Chromium Safe Storage' --access | grep -q '    entry 0: exe:.*chromium'
    expect "cookie:kept=yes-$$" "$(browse get.html cookie:)" "Chromium reads its cookie with its key"
    not_asked
    kill "$web"
    kill "$service"
}

# The suite's broker, with the service's copy as its deputy (Tests/broker-lib.sh); the stand-in
# answerer appends each question to $broker_dir/questions and answers per $broker_dir/answer.mode.
brokered_suite_start() {
    # shellcheck source=Tests/broker-lib.sh
    . "$here/../broker-lib.sh"
    broker_setup "kcdesk$$" kcdesk && broker_start_for_service "$bin"
}

# --- the suite ------------------------------------------------------------------------------

if [ -n "$inner" ]; then
    set -e
    [ -z "${DESKTOP_TRACE:-}" ] || set -x
    "$@"
    exit
fi

if ! command -v gnome-keyring-daemon >/dev/null || [ ! -f /usr/lib/systemd/user/gnome-keyring-daemon.service ]; then
    skip "gnome-keyring is not installed: every case of this suite runs against it"
    summary
    exit
fi
libsecret_dir=$(mktemp -d /tmp/desktop-libsecret-XXXXXX)
trap 'rm -rf "$libsecret_dir"' EXIT
libsecret_src=/usr/share/doc/git/contrib/credential/libsecret
if make -s -C "$libsecret_dir" -f "$libsecret_src/Makefile" VPATH="$libsecret_src" >/dev/null 2>&1; then
    export LIBSECRET_HELPER=$libsecret_dir/git-credential-libsecret
else
    skip "git-credential-libsecret could not be built from $libsecret_src (libsecret-1-dev missing?): the cases run without it"
fi

# DESKTOP_ONLY=FUNCTION runs that one case, for working on it.
if [ -n "${DESKTOP_ONLY:-}" ]; then
    case $DESKTOP_ONLY in brokered_*)
        trap 'broker_teardown; rm -rf "$libsecret_dir"' EXIT
        brokered_suite_start || exit 1 ;;
    esac
    check "$DESKTOP_ONLY" on_bus "$DESKTOP_ONLY"
    summary
    exit
fi
check "enable writes the autostart override, masks, unit link and activation file (no user manager); status; disable removes exactly those" \
    on_bus enable_and_disable_files
check "disable leaves a file the user changed since enable" on_bus changed_files_are_left_alone
check "enable stops gcr's SSH agent only once keychain-ssh-agent is enabled; disable gives it back exactly" on_bus ssh_agent_enable_and_disable
check "enable hands gnome-keyring's name over within seconds, every secret (and an app's portal secret) first; disable returns it" \
    on_bus hand_over_from_gnome_keyring
check "a collection that stays locked: enable changes nothing, gnome-keyring keeps serving" on_bus locked_collection_changes_nothing
check "2,000 look-alikes of gnome-keyring import over D-Bus, and again, in linear time" on_bus import_of_look_alikes_is_linear
check "import over D-Bus: dry run, every collection and item, a second run changes nothing; then every client finds what it stored" \
    on_bus import_twice_then_every_client
check "import --from another provider: a locked collection through its own prompt; content types and dates kept" \
    on_bus import_through_the_providers_prompt
check "import over D-Bus: a collection whose commit fails brings none of its items; the others come whole" \
    on_bus collection_comes_whole_or_not_at_all
check "export --to gnome-keyring: every item, the portal secret under gnome-keyring's portal, a second run adds nothing" \
    on_bus export_back_to_gnome_keyring
if command -v bwrap >/dev/null; then
    check "the portal backend: one secret per app id, kept across restarts, refused to a sandbox and while locked after a dismissed prompt" \
        on_bus portal_secret_per_app
    if [ -x /usr/libexec/xdg-desktop-portal ]; then
        check "Debian's xdg-desktop-portal offers the backend from keychain.portal; a sandboxed app's RetrieveSecret gets its secret" \
            on_bus real_portal_serves_a_sandboxed_app
    else
        skip "xdg-desktop-portal is not installed: the case runs the real portal"
    fi
else
    skip "bwrap (bubblewrap) is not installed: the portal case runs a sandboxed caller"
fi
if command -v chromium >/dev/null && command -v sqlite3 >/dev/null; then
    check "Chromium (headless, gnome-libsecret) reads the cookie it set under gnome-keyring after enable" on_bus chromium_keeps_its_cookie
else
    skip "chromium (or sqlite3) is not installed: the Chromium case needs Debian's chromium"
fi
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    trap 'broker_teardown; rm -rf "$libsecret_dir"' EXIT
    if brokered_suite_start; then
        check "with a broker: secret-tool and SecretStorage read their own items silently, each other's only when allowed; deny, always, revoke" \
            on_bus brokered_clients_are_asked
        check "with a broker: dbus-python reads python's items silently, secret-tool's by GetSecret and GetSecrets when allowed (once: an interpreter); grant, revoke, deny" \
            on_bus brokered_dbus_python_is_asked
        check "with a broker: a lock and an unlock made elsewhere show at the service's next call" on_bus brokered_lock_elsewhere_is_seen_at_once
        check "with a broker: a script whose connecting process then execs a trusted program is refused: nothing given, nobody asked (review 55)" \
            on_bus brokered_exec_after_connect_is_not_the_trusted_program
        check "with a broker: the same once the service looked at the script (a first read): still asked of nobody, nothing given" \
            on_bus brokered_exec_after_a_first_read_is_not_the_trusted_program
        check "with a broker: the same with the connection let through the exec and the child undumpable: refused" \
            on_bus brokered_exec_with_the_connection_inherited_is_not_the_trusted_program
        check "with a broker: a process of the user that takes the service's bus name gets no client's new secret (review 55)" \
            on_bus brokered_name_taken_over_gets_what_clients_store
        if command -v chromium >/dev/null; then
            check "with a broker: Chromium stores and reads its Safe Storage key with no question" on_bus brokered_chromium_keeps_its_key
        fi
    else
        fail=$((fail + 1)); echo "FAIL the suite's broker could not start"
    fi
else
    skip "the broker's cases need root and setpriv (a system user for the broker)"
fi
summary
