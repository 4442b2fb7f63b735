#!/usr/bin/env bash
# KDE: a wallet moves over whole and back, with Debian's kwalletd5 (5.103, its Secret Service API
# on) and KeePassXC (2.7.4, FdoSecrets on) as they really run, each filled through its own clients
# (KWallet's D-Bus API with folders, passwords, maps and binary entries; kwallet-query;
# secret-tool; SecretStorage). Each case has its own HOME, XDG folders, TMPDIR and
# XDG_RUNTIME_DIR, and its own session bus (dbus-run-session) whose only activatable services are
# in the case's folder: nothing of the machine's (its kwalletd5 or gnome-keyring activation files)
# starts. kwalletd5 runs headless (QT_QPA_PLATFORM=offscreen) with its wallet opened as
# pam_kwallet5 opens it at login: org.kde.KWallet.pamOpen with PBKDF2-HMAC-SHA512 of the password
# and the wallet's salt file; nothing shows a dialog. Whatever a case starts is stopped, by its
# pid, when the case ends. The cases of Tests/kde/cases-*.sh are sourced at the end
# and use the same functions. KDE_ONLY=FUNCTION runs that one case; KDE_TRACE=1 traces it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
# Inside a case's bus: run the named function of this file (see bus_suite_start).
bus_suite_start "$@"
[ -z "$inner" ] || shift 2
kde() { "$py" "$here/kde.py" "$@"; }
# What cases-server.sh's cases call: its client, and the service it drives.
kde_client() { "$py" "$here/server_client.py" "$@"; }
# KWALLET_TARGET=kwalletd5 runs cases-server.sh's cases against KWallet's own kwalletd5 instead
# (headless, its wallet opened with pamOpen as pam_kwallet5 opens it at login), to hold them to
# KWallet's behaviour: `KWALLET_TARGET=kwalletd5 bash Tests/kde/run.sh .build/debug`.
export KWALLET_TARGET=${KWALLET_TARGET:-keychain}

fresh() {
    case_dir=$(mktemp -d /tmp/kde-XXXXXX)
    export case_dir
    export HOME=$case_dir/home XDG_DATA_HOME=$case_dir/home/data XDG_CONFIG_HOME=$case_dir/home/config \
        XDG_CACHE_HOME=$case_dir/home/cache XDG_STATE_HOME=$case_dir/home/state XDG_RUNTIME_DIR=$case_dir/run \
        TMPDIR=$case_dir/tmp QT_QPA_PLATFORM=offscreen
    mkdir -p "$HOME" "$XDG_CONFIG_HOME" "$XDG_RUNTIME_DIR" "$TMPDIR" "$case_dir/services" && chmod 700 "$XDG_RUNTIME_DIR"
    unset KEYCHAIN_PATH DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL DISPLAY WAYLAND_DISPLAY
    sed "s|<servicedir>@SERVICES@</servicedir>|<servicedir>$XDG_DATA_HOME/dbus-1/services</servicedir><servicedir>$case_dir/services</servicedir>|" \
        "$here/../secret-service/session.conf" > "$case_dir/session.conf"
    # PINENTRY_RUNS: a case that makes this file sees how many pinentry ran at once.
    export KEYCHAIN_PINENTRY=$here/../secret-service/pinentry.sh PINENTRY_ANSWERS=$case_dir/answers PINENTRY_LOG=$case_dir/pinentry.log \
        PINENTRY_RUNS=$case_dir/runs
    : > "$PINENTRY_ANSWERS"
    # kwalletd as Plasma sets it up: enabled, past its first-use wizard, its Secret Service on.
    printf '[Wallet]\nEnabled=true\nFirst Use=false\nLaunch Manager=false\n\n[org.freedesktop.secrets]\napiEnabled=true\n' \
        > "$XDG_CONFIG_HOME/kwalletrc"
    ${case_setup:-:}
}

# The set-up cases-server.sh's cases ask of their runner: a login keychain (password "pw"), and
# the keychain's service (with --kwallet) activatable for the Secret Service's and KWallet's
# names, as kwallet-query and python-keyring start it on a desktop.
kde_server_setup() {
    local name exec="$bin/keychain-secret-service --kwallet"
    printf 'pw\n' | security create-keychain > /dev/null
    for name in org.freedesktop.secrets org.kde.kwalletd5 org.kde.kwalletd6; do
        [ "$KWALLET_TARGET" = keychain ] || { [ "$name" = org.kde.kwalletd5 ] && exec=/usr/bin/kwalletd5 || continue; }
        printf '[D-BUS Service]\nName=%s\nExec=%s\n' "$name" "$exec" > "$case_dir/services/$name.service"
    done
}

# confined APP COMMAND...: COMMAND in a sandbox as Flatpak makes one (a /.flatpak-info naming APP).
confined() {
    local app=$1; shift
    printf '[Application]\nname=%s\nruntime=runtime/org.example.Platform/x86_64/1\n' "$app" > "$HOME/flatpak-info-$app"
    bwrap --tmpfs / --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
        --symlink usr/sbin /sbin --ro-bind /etc /etc --proc /proc --dev /dev --bind /tmp /tmp --ro-bind "$here" "$here" \
        --ro-bind "$HOME/flatpak-info-$app" /.flatpak-info --setenv DBUS_SESSION_BUS_ADDRESS "$DBUS_SESSION_BUS_ADDRESS" \
        --unsetenv XDG_RUNTIME_DIR --chdir / -- "$@"
}

finish() {
    local keychain
    for keychain in "$XDG_DATA_HOME"/keychains/*.keychain-db; do
        [ -e "$keychain" ] && security delete-keychain "$keychain" >/dev/null 2>&1
    done
    rm -rf "$case_dir"
}

# on_bus FUNCTION ARGS...: FUNCTION in the case's own session bus, bounded in time.
on_bus() {
    # A pipe, not a process substitution: the case's log is read once all of it is written.
    timeout 150 dbus-run-session --config-file="$case_dir/session.conf" -- bash "$here/run.sh" --inner "$bin" "$@" 2>&1 \
        | { grep -v -e 'Failed to set fd limit' -e 'Reloaded configuration' -e 'Activating service name' -e 'Successfully activated' \
            -e 'platform plugin' || true; }
}

answers() { printf '%s\n' "$@" > "$PINENTRY_ANSWERS"; }

# What the case started (kwalletd5, keepassxc, keychain-secret-service), stopped by pid at its end.
started=()
stop_started() {
    local status=$? pid
    for pid in "${started[@]}"; do stop "$pid"; done
    started=()
    return "$status"
}

has_owner() {
    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner \
        "string:$1" 2>/dev/null | grep -q 'boolean true'
}

owner_pid() {
    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.GetConnectionUnixProcessID "string:$1" 2>/dev/null | awk '/uint32/ { print $2 }'
}

# wait_for_owner NAME PID: NAME on the bus, owned by PID (up to 10 s).
wait_for_owner() {
    local _
    for _ in $(seq 100); do [ "$(owner_pid "$1")" = "$2" ] && return 0; sleep 0.1; done
    echo "$1 is not owned by pid $2 (owner: $(owner_pid "$1"))"; return 1
}

# stop PID: the process (one this case started) ended, and waited for; killed outright if it
# is still there after 5 s (KeePassXC may sit in a dialog nobody sees).
stop() {
    local _
    kill "$1" 2>/dev/null || return 0
    for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# kwalletd5 headless, its pid in $kwalletd; returns once it has org.kde.kwalletd5 and its
# Secret Service has org.freedesktop.secrets.
start_kwalletd() {
    kwalletd5 >> "$case_dir/kwalletd.log" 2>&1 &
    kwalletd=$!
    started+=("$kwalletd")
    wait_for_owner org.kde.kwalletd5 "$kwalletd"
    grep -qx 'apiEnabled=false' "$XDG_CONFIG_HOME/kwalletrc" || wait_for_owner org.freedesktop.secrets "$kwalletd"
}

# kwallet_login WALLET...: each wallet opened (made, the first time) as pam_kwallet5 opens
# kdewallet with the login password ("login-pw"; another wallet's password is its name + "-pw").
kwallet_login() {
    local wallet
    for wallet in "$@"; do
        if [ "$wallet" = kdewallet ]; then kde pamopen "$wallet" login-pw; else kde pamopen "$wallet" "$wallet-pw"; fi
    done
}

# new_kwallet WALLET...: the wallets made, then kwalletd5 restarted and the wallets opened again,
# as at the next login. kwalletd's Secret Service lists the wallets it found at its start only.
new_kwallet() {
    start_kwalletd
    kwallet_login "$@"
    kde sync "$@"
    stop "$kwalletd"
    start_kwalletd
    kwallet_login "$@"
}

# restart_kwalletd WALLET...: the wallets written, kwalletd5 stopped and started again, the
# wallets opened again: a new login.
restart_kwalletd() {
    kde sync "$@"
    stop "$kwalletd"
    start_kwalletd
    kwallet_login "$@"
}

# ss_store SECRET secret-tool-store-ARGS...: secret-tool store, tried again when kwalletd fails
# the encrypted session, about one time in a hundred: "Client public key size is invalid"
# (libsecret sends its DH public key as the number's bytes, 127 when the top byte is zero, and
# kwalletd wants 128), or "Can't find session" (kwalletd has then written the item's attributes
# but no entry; the second try stores both under the same key).
ss_store() {
    local secret=$1 try
    shift
    for try in 1 2 3; do
        printf '%s' "$secret" | secret-tool store "$@" 2> "$case_dir/secret-tool.err" && return 0
        grep -q -e "Can't find session" -e 'public key size is invalid' "$case_dir/secret-tool.err" || break
        echo "secret-tool store, try $try: $(cat "$case_dir/secret-tool.err")"
    done
    cat "$case_dir/secret-tool.err" >&2
    return 1
}

# kdewallet (and Work) filled through KWallet's own clients: KWallet's D-Bus API (folders,
# passwords, maps, binary entries, an empty folder), kwallet-query, and its Secret Service
# (secret-tool; SecretStorage for an item without attributes and one in a folder of its label).
fill_kwallet() {
    kde fill kdewallet
    # kwallet-query -w writes over an entry that exists (a password, or a map given as JSON).
    kde write kdewallet Passwords 'through kwallet-query' 1 "$(kde qstring placeholder)"
    printf 'query-secret' | kwallet-query -w 'through kwallet-query' -f Passwords kdewallet 2>> "$case_dir/kwallet-query.log"
    kde write kdewallet 'Web Logins' 'https://example.com' 3 00000000
    printf '{"login":"ann","password":"map-secret"}' | kwallet-query -w 'https://example.com' -f 'Web Logins' kdewallet \
        2>> "$case_dir/kwallet-query.log"
    expect query-secret "$(kwallet-query -r 'through kwallet-query' -f Passwords kdewallet 2>> "$case_dir/kwallet-query.log")" \
        "kwallet-query's password, read back"
    ss_store ss-secret --label='Stored by secret-tool' service ss.example account ann
    # A second item of the same label: kwalletd keeps it under the key "Stored by secret-tool__0_".
    ss_store ss-other --label='Stored by secret-tool' service ss.example account bob
    ss_store mail-secret --label='Mail/ann' service imap.example account ann
    kde ss-store 'No attributes' 'plain-secret'
}

# The keychain's service for org.freedesktop.secrets (ARGS: --kwallet for KWallet's names too);
# its pid in $service.
start_service() {
    keychain-secret-service "$@" 2>> "$case_dir/service.log" &
    service=$!
    started+=("$service")
    wait_for_owner org.freedesktop.secrets "$service"
}

# KeePassXC headless with the database $case_dir/Passwords.kdbx (made by keepassxc-cli, its root
# group exposed to the Secret Service), opened with --pw-stdin; its pid in $keepassxc.
start_keepassxc() {
    local db=$case_dir/Passwords.kdbx
    if [ ! -e "$db" ]; then
        kde keepass-xml > "$case_dir/Passwords.xml"
        printf 'kp-pw\nkp-pw\n' | keepassxc-cli import -p -t 100 "$case_dir/Passwords.xml" "$db" > /dev/null 2>&1
        mkdir -p "$XDG_CONFIG_HOME/keepassxc"
        # FdoSecrets on, and no confirmation dialog (nobody could click it here).
        printf '[General]\nConfigVersion=2\n\n[FdoSecrets]\nEnabled=true\nShowNotification=false\nConfirmDeleteItem=false\nConfirmAccessItem=false\n' \
            > "$XDG_CONFIG_HOME/keepassxc/keepassxc.ini"
    fi
    printf 'kp-pw\n' | keepassxc --pw-stdin "$db" >> "$case_dir/keepassxc.log" 2>&1 &
    keepassxc=$!
    started+=("$keepassxc")
    wait_for_owner org.freedesktop.secrets "$keepassxc"
    # The database is open once its collection is listed unlocked.
    for _ in $(seq 100); do kde ss-collections | grep -q ' unlocked$' && return 0; sleep 0.1; done
    echo "KeePassXC serves no collection"; return 1
}

# last_line FILE: the summary line of an import or export.
last_line() { tail -n 1 "$1"; }

# export_twice NAME FIRST SECOND: export --to NAME twice, the summary lines FIRST and SECOND.
export_twice() {
    local summary
    for summary in "$2" "$3"; do
        keychain-secret-service export --to "$1" > "$case_dir/export.out"
        cat "$case_dir/export.out"
        expect "$summary" "$(last_line "$case_dir/export.out")"
    done
}

# --- cases (each runs inside its bus) ------------------------------------------------------

# Every native entry (each type, the empty folder), kwallet-query's, and the items kwalletd's
# Secret Service stored (with their attributes, once) come over, from both wallets; the
# keychain's Secret Service then shows exactly what the mapping says (checked against what
# kwalletd served before); a second import adds nothing and changes nothing.
import_every_entry() {
    new_kwallet kdewallet Work
    fill_kwallet
    kde write Work Passwords vpn 1 "$(kde qstring 'vpn-secret')"
    # A new login: kwalletd's Secret Service now serves its own items and none of the native ones.
    restart_kwalletd kdewallet Work
    { kde expected kdewallet login; kde expected Work Work; } | LC_ALL=C sort > "$case_dir/expected"
    { kde dump-native kdewallet; kde dump-native Work; } > "$case_dir/native.before"
    keychain-secret-service import --dry-run > "$case_dir/dry.out"
    cat "$case_dir/dry.out"
    expect "import: dry run: 15 would be added, 0 already there; nothing was changed" "$(last_line "$case_dir/dry.out")"
    grep -q '^would add     kwalletd5.s wallet “kdewallet”: folder “Empty Folder”$' "$case_dir/dry.out"
    [ ! -e "$XDG_DATA_HOME/keychains" ]
    answers login-pw login-pw Work-pw Work-pw
    keychain-secret-service import > "$case_dir/import.out"
    cat "$case_dir/import.out"
    expect "import: 15 added, 0 already there" "$(last_line "$case_dir/import.out")"
    before=$(security dump-keychain 2>/dev/null | sha256sum; security dump-keychain Work 2>/dev/null | sha256sum)
    keychain-secret-service import > "$case_dir/import.out"
    expect "import: 0 added, 15 already there" "$(last_line "$case_dir/import.out")"
    expect "$before" "$(security dump-keychain 2>/dev/null | sha256sum; security dump-keychain Work 2>/dev/null | sha256sum)" \
        "the keychains are unchanged"
    expect query-secret "$(security find-generic-password -s Passwords -a 'through kwallet-query' -w)" "kwallet-query's entry, by service and account"
    # The switch by hand: what the keychain's Secret Service shows is what the mapping says.
    stop "$kwalletd"
    start_service --kwallet
    kde actual login Work | LC_ALL=C sort > "$case_dir/actual"
    diff "$case_dir/expected" "$case_dir/actual"
    # And KWallet's API, served by the keychain, answers every native entry byte for byte.
    { kde dump kdewallet; kde dump Work; } > "$case_dir/native.after"
    diff "$case_dir/native.before" "$case_dir/native.after"
}

# Nothing is reported moved that was not: a wallet kwalletd cannot open without its dialog (nobody
# answers it) is said, with the entries it kept, and the run fails; the open wallet comes whole.
# An entry the keychain holds with another value is kept and said, and the run fails again.
unopened_wallet_fails_the_run() {
    new_kwallet kdewallet Closed
    kde fill kdewallet
    kde write Closed Passwords kept 1 "$(kde qstring 'closed-secret')"
    restart_kwalletd kdewallet
    answers login-pw login-pw
    status=0
    KEYCHAIN_PRESENCE_TIMEOUT=3 keychain-secret-service import > "$case_dir/import.out" 2> "$case_dir/import.err" || status=$?
    cat "$case_dir/import.out" "$case_dir/import.err"
    expect 1 "$status" "the exit status of an import that left a wallet behind"
    grep -q '^keychain-secret-service: import: kwalletd5.s wallet “Closed”: could not be opened (.*); nothing of it came$' "$case_dir/import.err"
    expect "import: 8 added, 0 already there, 1 could not come" "$(last_line "$case_dir/import.out")"
    [ ! -e "$XDG_DATA_HOME/keychains/Closed.keychain-db" ]
}

# A value changed in KWallet after an import is not written over the keychain's: said, and the
# run fails.
changed_entry_is_kept_and_said() {
    new_kwallet kdewallet
    kde fill kdewallet
    answers login-pw login-pw
    keychain-secret-service import --from org.kde.kwalletd5 > "$case_dir/import.out"
    expect "import: 8 added, 0 already there" "$(last_line "$case_dir/import.out")"
    kde write kdewallet Passwords mail.example 1 "$(kde qstring 'changed in KWallet')"
    status=0
    keychain-secret-service import > "$case_dir/import.out" 2> "$case_dir/import.err" || status=$?
    cat "$case_dir/import.out" "$case_dir/import.err"
    expect 1 "$status" "the exit status"
    grep -q 'kdewallet”: Passwords/mail.example: the keychain already holds another value under this folder and key; it is kept$' "$case_dir/import.err"
    expect "import: 0 added, 7 already there, 1 could not come" "$(last_line "$case_dir/import.out")"
    # security prints a secret that is not ASCII in hex.
    expect "$(printf '%s' 'pässwörd ✓' | od -An -tx1 | tr -d ' \n')" "$(security find-generic-password -s Passwords -a mail.example -w)" \
        "the keychain's value"
}

# The way back into KWallet: its entries natively (every byte as kwalletd served it before the
# import), the other items through its Secret Service; a second export changes nothing, though
# KWallet's search never finds an item without attributes (the issue's duplicates).
export_back_to_kwallet() {
    new_kwallet kdewallet
    fill_kwallet
    restart_kwalletd kdewallet
    kde dump kdewallet > "$case_dir/wallet.before"
    answers login-pw login-pw Work-pw Work-pw
    keychain-secret-service import > /dev/null
    # A new wallet, as on another machine: the keychain's items go back into it.
    stop "$kwalletd"
    rm -rf "$XDG_DATA_HOME/kwalletd"
    start_kwalletd
    # Before the wallet exists: a dry run makes none (kwalletd would ask for its password).
    keychain-secret-service export --to org.kde.kwalletd5 --dry-run > "$case_dir/dry.out"
    expect "export: dry run: 14 would be added, 0 already there; nothing was changed" "$(last_line "$case_dir/dry.out")"
    grep -q '^would create  org.kde.kwalletd5.s wallet “kdewallet”$' "$case_dir/dry.out"
    [ -z "$(kde wallets)" ]
    stop "$kwalletd"
    new_kwallet kdewallet
    keychain-secret-service export --to org.kde.kwalletd5 --dry-run > "$case_dir/dry.out"
    cat "$case_dir/dry.out"
    expect "export: dry run: 14 would be added, 0 already there; nothing was changed" "$(last_line "$case_dir/dry.out")"
    keychain-secret-service export --to org.kde.kwalletd5 > "$case_dir/export.out"
    cat "$case_dir/export.out"
    expect "export: 14 added, 0 already there" "$(last_line "$case_dir/export.out")"
    kde dump kdewallet > "$case_dir/wallet.after"
    diff "$case_dir/wallet.before" "$case_dir/wallet.after"
    keychain-secret-service export --to org.kde.kwalletd5 > "$case_dir/export.out"
    cat "$case_dir/export.out"
    expect "export: 0 added, 14 already there" "$(last_line "$case_dir/export.out")"
    kde dump kdewallet > "$case_dir/wallet.again"
    diff "$case_dir/wallet.before" "$case_dir/wallet.again"
    # And after KWallet's next start, which serves only the Secret Service items then.
    restart_kwalletd kdewallet
    keychain-secret-service export --to org.freedesktop.secrets > "$case_dir/export.out"
    expect "export: 0 added, 14 already there" "$(last_line "$case_dir/export.out")"
}

# kwalletd with its Secret Service API off: import reads the wallet natively all the same; export
# writes KWallet's entries natively and says the items that need its Secret Service, and fails.
secret_service_api_off() {
    sed -i 's/^apiEnabled=true$/apiEnabled=false/' "$XDG_CONFIG_HOME/kwalletrc"
    new_kwallet kdewallet
    kde fill kdewallet
    answers login-pw login-pw
    keychain-secret-service import --from org.kde.kwalletd5 > "$case_dir/import.out"
    cat "$case_dir/import.out"
    expect "import: 8 added, 0 already there" "$(last_line "$case_dir/import.out")"
    kde dump kdewallet > "$case_dir/wallet.before"
    stop "$kwalletd"
    start_service
    kde ss-store 'Keychain without attributes' 'kc-plain'
    stop "$service"
    rm -rf "$XDG_DATA_HOME/kwalletd"
    new_kwallet kdewallet
    status=0
    keychain-secret-service export --to org.kde.kwalletd5 > "$case_dir/export.out" 2> "$case_dir/export.err" || status=$?
    cat "$case_dir/export.out" "$case_dir/export.err"
    expect 1 "$status" "the exit status of an export that left an item behind"
    expect "export: 8 added, 0 already there, 1 could not come" "$(last_line "$case_dir/export.out")"
    grep -q "kwalletd5's Secret Service is off (kwalletrc: \[org.freedesktop.secrets\] apiEnabled): these items cannot go$" "$case_dir/export.err"
    kde dump kdewallet > "$case_dir/wallet.after"
    diff "$case_dir/wallet.before" "$case_dir/wallet.after"
}

# The issue's duplicates: items without attributes, which KWallet's search never returns, are
# recognised by label and secret on a second export into KWallet.
export_twice_to_kwallet() {
    printf 'login-pw\n' | security create-keychain > /dev/null
    start_service
    kde ss-store 'Keychain without attributes' 'kc-plain'
    printf 'through-us' | secret-tool store --label='Stored in the keychain' service new.example account bob
    security add-generic-password -s cli.example -a carol -w cli-here 2> /dev/null
    stop "$service"
    new_kwallet kdewallet
    export_twice org.kde.kwalletd5 "export: 3 added, 0 already there" "export: 0 added, 3 already there"
    expect through-us "$(secret-tool lookup service new.example account bob)" "secret-tool, through KWallet"
    expect 3 "$(kde ss-count)" "KWallet's items"
}

# KeePassXC: what its own clients stored comes over (with the attributes KeePassXC adds), once;
# the way back adds the keychain's items once, though KeePassXC decorates them with its own
# attributes (Title, UserName, Path, Uuid...), and a second export changes nothing.
keepassxc_there_and_back() {
    start_keepassxc
    printf 'kp-secret' | secret-tool store --label='Stored in KeePassXC' service kp.example account ann
    kde ss-store 'KeePassXC without attributes' 'kp-plain'
    answers login-pw login-pw
    keychain-secret-service import > "$case_dir/import.out"
    cat "$case_dir/import.out"
    expect "import: 2 added, 0 already there" "$(last_line "$case_dir/import.out")"
    expect kp-secret "$(security find-generic-password -s kp.example -a ann -w 2>/dev/null || security find-generic-password -l 'Stored in KeePassXC' -w)"
    keychain-secret-service import > "$case_dir/import.out"
    expect "import: 0 added, 2 already there" "$(last_line "$case_dir/import.out")"
    security add-generic-password -s cli.example -a carol -w cli-here 2> /dev/null
    stop "$keepassxc"
    start_service
    kde ss-store 'Keychain without attributes' 'kc-plain'
    printf 'through-us' | secret-tool store --label='Stored in the keychain' service new.example account bob
    stop "$service"
    start_keepassxc
    export_twice org.freedesktop.secrets "export: 3 added, 2 already there" "export: 0 added, 5 already there"
    expect through-us "$(secret-tool lookup service new.example account bob)" "secret-tool, through KeePassXC"
    expect 5 "$(kde ss-count)" "KeePassXC's items"
}

if [ -n "$inner" ]; then
    # The cases of cases-*.sh, so that their functions can run inside a bus too: what they
    # register with check or skip is registered by the outer run only.
    check() { :; }
    skip() { :; }
    for cases in "$here"/cases-*.sh; do
        # shellcheck source=/dev/null
        [ -e "$cases" ] && . "$cases"
    done
    set -e
    trap stop_started EXIT
    [ -z "${KDE_TRACE:-}" ] || set -x
    if [ "$KWALLET_TARGET" = kwalletd5 ]; then
        # kwalletd5 outlives its bus (it saves the wallet as it goes): stopped by its pid.
        kde_client pam_open pw
        started+=("$(owner_pid org.kde.kwalletd5)")
    fi
    "$@"
    exit
fi

if ! command -v kwalletd5 >/dev/null || ! command -v kwallet-query >/dev/null; then
    skip "kwalletd5 or kwallet-query is not installed (apt install libkf5wallet-bin): every KWallet case runs against them"
    summary
    exit
fi
if ! "$py" -c 'import dbus, secretstorage' 2>/dev/null; then
    skip "python3-dbus or python3-secretstorage is not installed: the cases fill the wallets with them"
    summary
    exit
fi

# The set-up of the cases file that defines FUNCTION (kde_NAME_setup of cases-NAME.sh), if any.
setup_of() {
    local cases name
    for cases in "$here"/cases-*.sh; do
        grep -q "^$1() " "$cases" 2>/dev/null || continue
        name=${cases##*/cases-}
        name=${name%.sh}
        declare -F "kde_${name}_setup" > /dev/null && echo "kde_${name}_setup"
    done
}

# KDE_ONLY=FUNCTION runs that one case, for working on it.
if [ -n "${KDE_ONLY:-}" ]; then
    for cases in "$here"/cases-*.sh; do
        # shellcheck source=/dev/null
        [ -e "$cases" ] && . "$cases"
    done
    case_setup=$(setup_of "$KDE_ONLY")
    check "$KDE_ONLY" on_bus "$KDE_ONLY"
    summary
    exit
fi
if [ "$KWALLET_TARGET" = kwalletd5 ]; then
    # shellcheck source=Tests/kde/cases-server.sh
    . "$here/cases-server.sh"
    case_setup=kde_server_setup
    echo "cases-server.sh's cases against kwalletd5 itself"
    kde_server_cases
    summary
    exit
fi
check "import from kwalletd5: every entry of each type, empty folders, its Secret Service items once; a second run adds nothing" \
    on_bus import_every_entry
check "import from kwalletd5: a wallet that cannot be opened is said, and the run fails; the open one comes whole" \
    on_bus unopened_wallet_fails_the_run
check "import from kwalletd5: an entry changed in KWallet does not overwrite the keychain's; said, and the run fails" \
    on_bus changed_entry_is_kept_and_said
check "export --to org.kde.kwalletd5: entries natively, byte for byte, the rest through its Secret Service; a second run adds nothing" \
    on_bus export_back_to_kwallet
check "kwalletd's Secret Service off: import natively all the same; export says what needs it, and fails" on_bus secret_service_api_off
check "export --to org.kde.kwalletd5 twice: items without attributes (KWallet's search never finds them) are not added again" \
    on_bus export_twice_to_kwallet
if command -v keepassxc >/dev/null && command -v keepassxc-cli >/dev/null; then
    check "KeePassXC (FdoSecrets): import, and export twice: its decorated items are recognised, nothing added again" \
        on_bus keepassxc_there_and_back
else
    skip "keepassxc is not installed: the KeePassXC case runs against it"
fi
# The cases files: cases-NAME.sh defines its case functions and kde_NAME_cases, which
# registers them (check, skip); each of its cases is set up by kde_NAME_setup where there is one.
for cases in "$here"/cases-*.sh; do
    [ -e "$cases" ] || continue
    # shellcheck source=/dev/null
    . "$cases"
    name=${cases##*/cases-}
    name=${name%.sh}
    case_setup=
    if declare -F "kde_${name}_setup" > /dev/null; then case_setup=kde_${name}_setup; fi
    if declare -F "kde_${name}_cases" > /dev/null; then
        "kde_${name}_cases"
    else
        echo "FAIL $cases registers no cases (kde_${name}_cases)"; fail=$((fail + 1))
    fi
done
summary
