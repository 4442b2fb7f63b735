#!/usr/bin/env bash
# security import-secrets with real sources: keyring files written by Debian's own
# gnome-keyring-daemon (run once for the suite in a private dbus-run-session whose bus activates
# nothing, its HOME and XDG folders in a temporary folder; items stored through its own clients:
# secret-tool, git-credential-libsecret built from git's contrib sources, python3-secretstorage;
# then the daemon is stopped), credential-store files written by `git credential-store`, and
# docker config.json files. Each case has its own HOME, XDG folders and keychains; git runs with
# GIT_CONFIG_NOSYSTEM=1, so the machine's /etc/gitconfig is never read.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
# Inside a case's bus: run the named function of this file (see bus_suite_start).
bus_suite_start "$@"
[ -z "$inner" ] || shift 2
items() { "$py" "$here/keyring_items.py" "$@"; }

fresh() {
    case_dir=$(mktemp -d /tmp/import-XXXXXX)
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config XDG_RUNTIME_DIR=$case_dir/run
    mkdir -p "$XDG_RUNTIME_DIR" "$XDG_DATA_HOME" && chmod 700 "$XDG_RUNTIME_DIR"
    unset KEYCHAIN_PATH DBUS_SESSION_BUS_ADDRESS DOCKER_CONFIG
    keyrings=$XDG_DATA_HOME/keyrings
}

finish() {
    local keychain
    for keychain in "$case_dir"/data/keychains/*.keychain-db; do
        [ -e "$keychain" ] && security delete-keychain "$keychain" >/dev/null 2>&1
    done
    rm -rf "$case_dir"
}

# A session bus that activates only what is in FOLDER/services (nothing, or our service).
bus_config() {
    mkdir -p "$1/services"
    sed "s|@SERVICES@|$1/services|" "$here/../secret-service/session.conf" > "$1/session.conf"
}

# on_service FUNCTION ARGS...: FUNCTION with keychain-secret-service as the Secret Service.
on_service() {
    bus_config "$case_dir/bus"
    sed "s|@BINDIR@|$bin|" "$here/../../Sources/keychain-secret-service/dbus/org.freedesktop.secrets.service.in" \
        > "$case_dir/bus/services/org.keychain-linux.secrets.service"
    timeout 60 dbus-run-session --config-file="$case_dir/bus/session.conf" -- bash "$here/run.sh" --inner "$bin" "$@" \
        2> >(grep -v 'Failed to set fd limit' >&2)
}

# status_and_stderr COMMAND...: "STATUS|STDERR" of a command whose stdout is dropped.
status_and_stderr() {
    local err status
    err=$("$@" 2>&1 >/dev/null)
    status=$?
    echo "$status|$err"
}

sha() { sha256sum "$1" | cut -d' ' -f1; }
# absent PATTERN FILE...: fails when grep finds it (a bare `! grep` never fails under set -e).
absent() { if grep -q "$@"; then echo "found [$1] in ${*:2}"; return 1; fi; }
mode() { stat -c %a "$1"; }
git_get() { printf 'protocol=%s\nhost=%s\n%s\n' "$1" "$2" "${3:-}" | git-credential-keychain get; }
field() { sed -n "s/^$1=//p"; }

# --- the real keyrings ---------------------------------------------------------------------

# gnome-keyring-daemon in this bus, its login keyring unlocked (or created) with the login
# password as pam_gnome_keyring would; its pid in $daemon.
start_daemon() {
    local _
    printf 'login-pw' | gnome-keyring-daemon --foreground --unlock --components=secrets >> "$1/daemon.log" 2>&1 &
    daemon=$!
    for _ in $(seq 100); do
        dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
            org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q 'boolean true' && return
        sleep 0.1
    done
    echo "gnome-keyring-daemon did not come onto the bus"; return 1
}

stop_daemon() {
    kill "$daemon"
    wait "$daemon"
}

# Inside gnome-keyring's private bus: the daemon unlocks (creates) login.keyring with the login
# password, clients store items, and the daemon is stopped (it has written its files). Then a
# new daemon loads those files, as at the next login, and each collection is dumped as its
# service shows them; the import must give the same. The daemon is stopped before the files
# are used.
make_keyrings_inner() {
    local out=$1 daemon
    export HOME=$out/home XDG_DATA_HOME=$out/home/data XDG_CONFIG_HOME=$out/home/config XDG_RUNTIME_DIR=$out/run
    mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
    start_daemon "$out"
    # Chromium's key as Chromium stores it through libsecret: 16 random bytes, base64.
    head -c 16 /dev/urandom | base64 | tr -d '\n' > "$out/chromium.key"
    secret-tool store --label='Chromium Safe Storage' xdg:schema chrome_libsecret_os_crypt_password_v2 application chromium \
        < "$out/chromium.key"
    if [ -n "${LIBSECRET_HELPER:-}" ]; then
        printf 'protocol=https\nhost=git.example.com:8443\nusername=ann\npassword=git-secret\n\n' | "$LIBSECRET_HELPER" store >/dev/null
    else
        # git's libsecret helper's attributes (org.git.Password), stored by secret-tool instead.
        printf 'git-secret' | secret-tool store --label='Git: https://git.example.com:8443/' xdg:schema org.git.Password \
            user ann server git.example.com port 8443 protocol https
    fi
    items fill
    stop_daemon
    start_daemon "$out"
    items unlock Work work-pw
    items unlock Plain ''
    items label login > "$out/login.label"
    items dump login > "$out/login.dump"
    items dump Work > "$out/work.dump"
    items dump Plain > "$out/plain.dump"
    stop_daemon
    cp -a "$XDG_DATA_HOME/keyrings" "$out/keyrings"
}

make_keyrings() {
    fixtures=$(mktemp -d /tmp/import-keyrings-XXXXXX)
    bus_config "$fixtures"
    timeout 60 dbus-run-session --config-file="$fixtures/session.conf" -- bash "$here/run.sh" --inner "$bin" \
        make_keyrings_inner "$fixtures" 2> >(grep -v 'Failed to set fd limit' >&2)
}

# --- cases ---------------------------------------------------------------------------------

daemon_wrote_the_files() {
    ls -la "$fixtures/keyrings"
    head -c 16 "$fixtures/keyrings/login.keyring" | od -c | head -1
    expect "GnomeKeyring" "$(head -c 12 "$fixtures/keyrings/login.keyring")" "the binary format"
    expect "GnomeKeyring" "$(head -c 12 "$fixtures/keyrings/Work.keyring")" "the binary format"
    expect "[keyring]" "$(head -1 "$fixtures/keyrings/Plain.keyring")" "the plain-text format, for an empty password"
    expect "Work" "$(cat "$fixtures/keyrings/default")" "SetAlias default wrote the default file"
    expect 4 "$(wc -l < "$fixtures/login.dump")" "items gnome-keyring showed in login"
}

login_keyring() {
    cp -a "$fixtures/keyrings" "$keyrings"
    local key
    key=$(cat "$fixtures/chromium.key")
    printf 'login-pw\n' | security import-secrets --keyring "$keyrings/login.keyring" > "$case_dir/out"
    cat "$case_dir/out"
    expect "import-secrets: 4 added, 0 already there" "$(tail -1 "$case_dir/out")"
    # The login keychain was made with the keyring's password.
    security lock-keychain login
    printf 'login-pw\n' | security unlock-keychain login
    expect "$key" "$(security find-generic-password -l 'Chromium Safe Storage' -w)" "Chromium's key, exactly"
    expect git-secret "$(security find-internet-password -s git.example.com -P 8443 -a ann -r htps -w)"
    out=$(git_get https git.example.com:8443)
    expect ann "$(echo "$out" | field username)" "git-credential-keychain finds libsecret's credential"
    expect git-secret "$(echo "$out" | field password)"
    expect 00ff62696e80 "$(security find-generic-password -s mail.example -a ann@example -w)" "a binary secret, byte for byte"
    expect tok-123 "$(security find-generic-password -l 'My app token' -w)"
    # Labels, attributes, secrets and dates as gnome-keyring's service showed them.
    on_service items dump login > "$case_dir/login.dump"
    diff "$fixtures/login.dump" "$case_dir/login.dump"
    expect "$(cat "$fixtures/login.label")" "$(on_service items label login)" "the collection's label, as gnome-keyring's"
    # A second import adds and changes nothing.
    before=$(security dump-keychain -d login 2>/dev/null | sha256sum)
    printf 'login-pw\n' | security import-secrets --keyring "$keyrings/login.keyring" > "$case_dir/out"
    expect "import-secrets: 0 added, 4 already there" "$(tail -1 "$case_dir/out")"
    expect "$before" "$(security dump-keychain -d login 2>/dev/null | sha256sum)" "the keychain is unchanged"
    expect "$(sha "$fixtures/keyrings/login.keyring")" "$(sha "$keyrings/login.keyring")" "the keyring file is unchanged"
}

keyrings_folder() {
    cp -a "$fixtures/keyrings" "$keyrings"
    # A dry run lists and changes nothing.
    printf 'login-pw\nwork-pw\n' | security import-secrets --keyrings -n > "$case_dir/out"
    cat "$case_dir/out"
    grep -q "^would add .*Work.keyring: \"VPN\"" "$case_dir/out"
    grep -q "^would make .*Work.keychain-db the default keychain" "$case_dir/out"
    expect "import-secrets: dry run: 6 would be added, 0 already there; nothing was changed" "$(tail -1 "$case_dir/out")"
    [ ! -e "$XDG_DATA_HOME/keychains" ] || [ -z "$(ls "$XDG_DATA_HOME/keychains")" ]
    [ ! -e "$XDG_CONFIG_HOME/keychain/default-keychain" ]
    # login first, then Plain (no password: the new keychain's is asked), then Work.
    printf 'login-pw\nplain-new\nwork-pw\n' | security import-secrets --keyrings > "$case_dir/out"
    expect "import-secrets: 6 added, 0 already there" "$(tail -1 "$case_dir/out")"
    expect "    \"$XDG_DATA_HOME/keychains/Work.keychain-db\"" "$(security default-keychain)" "the default file respected"
    expect vpn-pw "$(security find-generic-password -s vpn.example -a ann -w Work)"
    expect plain-secret "$(security find-generic-password -l 'Plain item' -w Plain)"
    security lock-keychain Plain
    printf 'plain-new\n' | security unlock-keychain Plain
    expect Work "$(on_service items label Work)"
    on_service items dump Work > "$case_dir/work.dump"
    diff "$fixtures/work.dump" "$case_dir/work.dump"
    on_service items dump Plain > "$case_dir/plain.dump"
    diff "$fixtures/plain.dump" "$case_dir/plain.dump"
    # Again: nothing added (the plain keyring needs no password, its keychain is unlocked).
    printf 'login-pw\nwork-pw\n' | security import-secrets --keyrings > "$case_dir/out"
    expect "import-secrets: 0 added, 6 already there" "$(tail -1 "$case_dir/out")"
}

locked_keychain_with_another_password() {
    cp -a "$fixtures/keyrings" "$keyrings"
    printf 'other-pw\n' | security create-keychain login
    security lock-keychain login
    # The keyring's password does not open the keychain: its own is asked next.
    printf 'login-pw\nother-pw\n' | security import-secrets --keyring "$keyrings/login.keyring" > "$case_dir/out"
    expect "import-secrets: 4 added, 0 already there" "$(tail -1 "$case_dir/out")"
    expect tok-123 "$(security find-generic-password -l 'My app token' -w)"
    # With the same password, the keyring's unlocks it without a prompt.
    printf 'work-pw\n' | security create-keychain Work
    security lock-keychain Work
    printf 'work-pw\n' | security import-secrets --keyring "$keyrings/Work.keyring" > "$case_dir/out"
    expect "import-secrets: 1 added, 0 already there" "$(tail -1 "$case_dir/out")"
}

wrong_password() {
    cp -a "$fixtures/keyrings" "$keyrings"
    result=$(printf 'nope\n' | status_and_stderr security import-secrets --keyring "$keyrings/login.keyring")
    expect "51|security: import-secrets: $keyrings/login.keyring: the password does not open this keyring (errSecAuthFailed)" "$result"
    [ ! -e "$XDG_DATA_HOME/keychains/login.keychain-db" ]
    # The other sources still come.
    result=$(printf 'nope\nwork-pw\n' | status_and_stderr security import-secrets --keyring "$keyrings/login.keyring" --keyring "$keyrings/Work.keyring")
    expect 51 "${result%%|*}"
    expect vpn-pw "$(security find-generic-password -s vpn.example -w Work)"
}

truncated_and_hostile_files() {
    cp -a "$fixtures/keyrings" "$keyrings"
    local size
    size=$(stat -c %s "$keyrings/login.keyring")
    head -c $((size - 7)) "$keyrings/login.keyring" > "$case_dir/cut.keyring"
    result=$(printf 'login-pw\n' | status_and_stderr security import-secrets --keyring "$case_dir/cut.keyring")
    expect "93|security: import-secrets: $case_dir/cut.keyring: the keyring file is truncated or damaged (it ends inside its encrypted part) (errSecDecode)" "$result"
    head -c 30 "$keyrings/login.keyring" > "$case_dir/short.keyring"
    result=$(printf 'login-pw\n' | status_and_stderr security import-secrets --keyring "$case_dir/short.keyring")
    expect 93 "${result%%|*}"
    expect 1 "$(echo "${result#*|}" | wc -l)" "one line"
    # 10^9 KDF iterations asked for: refused at once.
    "$py" - "$keyrings/login.keyring" "$case_dir/slow.keyring" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], 'rb').read())
name = struct.unpack('>I', data[20:24])[0]
at = 24 + name + 8 + 8 + 4 + 4
data[at:at + 4] = struct.pack('>I', 10 ** 9)
open(sys.argv[2], 'wb').write(data)
PY
    start=$(date +%s)
    result=$(printf 'login-pw\n' | timeout 20 bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --keyring '$case_dir/slow.keyring'")
    expect "93|security: import-secrets: $case_dir/slow.keyring: the keyring file asks for 1000000000 hash iterations; more than 1000000 is refused (gnome-keyring uses fewer than 4096) (errSecDecode)" "$result"
    [ $(( $(date +%s) - start )) -lt 5 ]
    printf 'not a keyring\n' > "$case_dir/junk.keyring"
    result=$(status_and_stderr security import-secrets --keyring "$case_dir/junk.keyring")
    expect 93 "${result%%|*}"
    [ ! -e "$XDG_DATA_HOME/keychains/login.keychain-db" ]
}

git_credential_store() {
    printf 'pw\n' | security create-keychain
    # Written by git's own credential-store: percent-encoding, ports, paths.
    printf 'protocol=https\nhost=example.com\nusername=al@ice\npassword=p:w/d%%+ü\n\n' | git credential-store store
    printf 'protocol=https\nhost=git.example.org:8443\npath=org/repo.git\nusername=bob\npassword=bob-pw\n\n' | git credential-store store
    printf 'protocol=http\nhost=[::1]:8080\nusername=v6\npassword=p6\n\n' | git credential-store store
    mkdir -p "$XDG_CONFIG_HOME/git"
    printf 'protocol=imaps\nhost=mail.example\nusername=m\npassword=imap-pw\n\n' | git credential-store --file "$XDG_CONFIG_HOME/git/credentials" store
    # Lines git ignores, and a repeat that git does not use.
    printf 'garbage\nhttps://nopassword@example.net\nhttps://al%%40ice:repeat@example.com\n' >> "$HOME/.git-credentials"
    cat "$HOME/.git-credentials"
    local before mode_before
    before=$(sha "$HOME/.git-credentials")
    mode_before=$(mode "$HOME/.git-credentials")
    security import-secrets --git-credentials --dry-run > "$case_dir/out"
    cat "$case_dir/out"
    expect "import-secrets: dry run: 4 would be added, 0 already there, 3 skipped; nothing was changed" "$(tail -1 "$case_dir/out")"
    expect 0 "$(security dump-keychain | grep -c '^class: "inet"')" "nothing stored by a dry run"
    security import-secrets --git-credentials > "$case_dir/out" 2> "$case_dir/err"
    cat "$case_dir/err"
    expect "import-secrets: 4 added, 0 already there, 3 skipped" "$(tail -1 "$case_dir/out")"
    expect 3 "$(wc -l < "$case_dir/err")" "one line per skipped line"
    git config --global credential.helper keychain
    out=$(printf 'protocol=https\nhost=example.com\n\n' | git credential fill)
    expect al@ice "$(echo "$out" | field username)"
    expect 'p:w/d%+ü' "$(echo "$out" | field password)"
    expect bob-pw "$(git_get https git.example.org:8443 path=org/repo.git | field password)"
    expect p6 "$(git_get http '[::1]:8080' | field password)"
    expect imap-pw "$(git_get imaps mail.example | field password)"
    expect imap-pw "$(security find-internet-password -s mail.example -r imps -w)"
    expect 'https://example.com (git)' "$(security find-internet-password -s example.com | sed -n 's/^    0x00000007 <blob>="\(.*\)"$/\1/p')" "git-credential-keychain's label"
    security import-secrets --git-credentials > "$case_dir/out" 2>/dev/null
    expect "import-secrets: 0 added, 4 already there, 3 skipped" "$(tail -1 "$case_dir/out")"
    expect 4 "$(security dump-keychain | grep -c '^class: "inet"')"
    expect "$before" "$(sha "$HOME/.git-credentials")" "the file is unchanged"
    expect "$mode_before" "$(mode "$HOME/.git-credentials")"
    expect 600 "$mode_before" "git's own file mode"
    # Another password for the same credential in the keychain is kept, and said.
    printf 'https://carol:new@example.org\n' > "$case_dir/other"
    printf 'protocol=https\nhost=example.org\nusername=carol\npassword=old\n\n' | git-credential-keychain store
    result=$(status_and_stderr security import-secrets --git-credentials "$case_dir/other")
    expect "45|security: import-secrets: $case_dir/other line 1 (https://carol@example.org): the keychain already holds another password for this credential; the keychain's is kept (errSecDuplicateItem)" "$result"
    expect old "$(security find-internet-password -s example.org -w)"
}

docker_config() {
    printf 'pw\n' | security create-keychain
    mkdir -p "$HOME/.docker"
    cat > "$HOME/.docker/config.json" <<EOF
{
	"auths": {
		"https://index.docker.io/v1/": {
			"auth": "$(printf 'alice:d0cker pw' | base64)",
			"email": "alice@example"
		},
		"registry.example:5000": {
			"identitytoken": "id-token-1"
		},
		"http://insecure.example": {
			"auth": "$(printf 'bob:plain' | base64)"
		}
	},
	"psFormat": "table {{.ID}}",
	"credHelpers": {
		"gcr.io": "gcloud"
	}
}
EOF
    chmod 644 "$HOME/.docker/config.json"
    local before
    before=$(sha "$HOME/.docker/config.json")
    security import-secrets --docker-config -n > "$case_dir/out"
    cat "$case_dir/out"
    expect "import-secrets: dry run: 3 would be added, 0 already there; nothing was changed" "$(tail -1 "$case_dir/out")"
    expect "$before" "$(sha "$HOME/.docker/config.json")" "a dry run changes nothing"
    expect 1 "$(ls "$HOME/.docker" | wc -l)" "no backup from a dry run"
    security import-secrets --docker-config > "$case_dir/out"
    expect "import-secrets: 3 added, 0 already there" "$(tail -1 "$case_dir/out")"
    expect "$before" "$(sha "$HOME/.docker/config.json.before-keychain")" "the old file kept"
    expect 600 "$(mode "$HOME/.docker/config.json.before-keychain")"
    expect 600 "$(mode "$HOME/.docker/config.json")"
    cat "$HOME/.docker/config.json"
    expect keychain "$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["credsStore"])' "$HOME/.docker/config.json")"
    absent '"auth"\|identitytoken\|id-token-1' "$HOME/.docker/config.json"
    grep -q '"email": "alice@example"' "$HOME/.docker/config.json"
    grep -q '"gcr.io": "gcloud"' "$HOME/.docker/config.json"
    grep -q '"psFormat": "table {{.ID}}"' "$HOME/.docker/config.json"
    expect '{"ServerURL":"https://index.docker.io/v1/","Username":"alice","Secret":"d0cker pw"}' \
        "$(echo https://index.docker.io/v1/ | docker-credential-keychain get)"
    expect '{"ServerURL":"registry.example:5000","Username":"\u003ctoken\u003e","Secret":"id-token-1"}' \
        "$(echo registry.example:5000 | docker-credential-keychain get)"
    expect '{"ServerURL":"http://insecure.example","Username":"bob","Secret":"plain"}' \
        "$(echo http://insecure.example | docker-credential-keychain get)"
    # Again: nothing inline is left, nothing is added, no second backup.
    after=$(sha "$HOME/.docker/config.json")
    security import-secrets --docker-config > "$case_dir/out"
    expect "import-secrets: 0 added, 0 already there" "$(tail -1 "$case_dir/out")"
    expect "$after" "$(sha "$HOME/.docker/config.json")"
    expect 2 "$(ls "$HOME/.docker" | wc -l)"
    # Another helper named as credsStore: one line, the file left alone.
    printf '{"auths": {"r.example": {"auth": "%s"}}, "credsStore": "desktop"}\n' "$(printf 'u:p' | base64)" > "$case_dir/other.json"
    before=$(sha "$case_dir/other.json")
    result=$(status_and_stderr security import-secrets --docker-config "$case_dir/other.json")
    expect "206|security: import-secrets: $case_dir/other.json: its credsStore is \"desktop\": docker keeps its logins in that helper; nothing was moved and the file is unchanged (errSecParam)" "$result"
    expect "$before" "$(sha "$case_dir/other.json")"
    # An unreadable login: said, the file left as it is, the others still come.
    printf '{"auths": {"bad.example": {"auth": "!!"}, "good.example": {"auth": "%s"}}}\n' "$(printf 'g:gp' | base64)" > "$case_dir/bad.json"
    before=$(sha "$case_dir/bad.json")
    result=$(status_and_stderr security import-secrets --docker-config "$case_dir/bad.json")
    expect 93 "${result%%|*}"
    grep -q "bad.example: its auth is not base64 of user:password" <<< "$result"
    expect "$before" "$(sha "$case_dir/bad.json")"
    expect 1 "$(find "$case_dir" -maxdepth 1 -name 'bad.json*' | wc -l)" "no backup of a file left alone"
    expect '{"ServerURL":"good.example","Username":"g","Secret":"gp"}' "$(echo good.example | docker-credential-keychain get)"
    # A login of a user whose password the keychain holds for that URL, not as docker's (git's
    # here): kept, said, the file left alone. Also when new items are synchronizable, which
    # makes them no duplicate of the item in Apple's rules: the login would shadow git's.
    printf 'protocol=https\nhost=shared.example\nusername=u\npassword=git-pw\n\n' | git-credential-keychain store
    printf '{"auths": {"https://shared.example": {"auth": "%s"}}}\n' "$(printf 'u:docker-pw' | base64)" > "$case_dir/shared.json"
    before=$(sha "$case_dir/shared.json")
    for default in off on; do
        security sync default "$default"
        result=$(status_and_stderr security import-secrets --docker-config "$case_dir/shared.json")
        expect "45|security: import-secrets: $case_dir/shared.json: https://shared.example: the keychain already holds a password of this user for this registry's URL (not docker's); it is kept (errSecDuplicateItem)
security: import-secrets: $case_dir/shared.json is left as it is: 1 of its logins could not be moved into the keychain" "$result" "sync default $default"
        expect "$before" "$(sha "$case_dir/shared.json")"
        expect git-pw "$(git_get https shared.example | field password)"
        expect 1 "$(security dump-keychain | grep -c '"srvr"<blob>="shared.example"')"
    done
    security sync default off
}

progress_only_on_a_terminal() {
    cp -a "$fixtures/keyrings" "$keyrings"
    # stderr a terminal (script's pty): the count shows, and is erased before the summary.
    script -qec "printf 'login-pw\\n' | security import-secrets --keyring '$keyrings/login.keyring'" /dev/null > "$case_dir/tty"
    od -c "$case_dir/tty" | head -20
    grep -q 'import-secrets: login.keyring 4/4' "$case_dir/tty"
    grep -q $'\r\e\[K' "$case_dir/tty"
    # Not a terminal: no progress, no escape sequences.
    printf 'login-pw\n' | security import-secrets --keyring "$keyrings/login.keyring" > "$case_dir/out" 2> "$case_dir/err"
    absent $'\e' "$case_dir/err" "$case_dir/out"
    expect "import-secrets: 0 added, 4 already there" "$(tail -1 "$case_dir/out")"
}

everything_at_once() {
    cp -a "$fixtures/keyrings" "$keyrings"
    printf 'https://u:git-all@git.all.example\n' > "$HOME/.git-credentials"
    mkdir -p "$HOME/.docker"
    printf '{"auths": {"all.example": {"auth": "%s"}}}\n' "$(printf 'd:docker-all' | base64)" > "$HOME/.docker/config.json"
    local docker_before
    docker_before=$(sha "$HOME/.docker/config.json")
    # A dry run counts git's and docker's logins into the keychains it would make.
    printf 'login-pw\nwork-pw\n' | security import-secrets --all -n > "$case_dir/out"
    cat "$case_dir/out"
    expect "import-secrets: dry run: 8 would be added, 0 already there; nothing was changed" "$(tail -1 "$case_dir/out")"
    grep -q '^would add .*(https://u@git.all.example)$' "$case_dir/out"
    grep -q '^would change .*config.json: credsStore "keychain", 1 inline logins removed' "$case_dir/out"
    [ ! -e "$XDG_DATA_HOME/keychains" ] || [ -z "$(ls "$XDG_DATA_HOME/keychains")" ]
    expect "$docker_before" "$(sha "$HOME/.docker/config.json")"
    # The keyrings come first: login's keychain is made, Work becomes the default keychain, and
    # git's and docker's logins go where their helpers now look.
    printf 'login-pw\nplain-new\nwork-pw\n' | security import-secrets --all > "$case_dir/out"
    expect "import-secrets: 8 added, 0 already there" "$(tail -1 "$case_dir/out")"
    expect git-all "$(git_get https git.all.example | field password)"
    expect '{"ServerURL":"all.example","Username":"d","Secret":"docker-all"}' "$(echo all.example | docker-credential-keychain get)"
    printf 'login-pw\nwork-pw\n' | security import-secrets --all > "$case_dir/out"
    expect "import-secrets: 0 added, 7 already there" "$(tail -1 "$case_dir/out")"
    # Nothing to import: said, not a failure.
    rm -rf "$keyrings" "$HOME/.git-credentials" "$HOME/.docker"
    security import-secrets --all > "$case_dir/out"
    expect "import-secrets: 0 added, 0 already there" "$(tail -1 "$case_dir/out")"
}

# Look-alikes: one label and attribute set, a secret each, as gnome-keyring keeps items stored
# with the same attributes. Each item's "already there?" read every earlier one (4,000 took two
# minutes); read once per attribute set, 10,000 take about 2 s in a debug build. The time limit
# bounds the work's growth with a tenfold margin; it is no speed test.
look_alikes_in_linear_time() {
    local secrets
    "$py" "$here/../stress/keyring_file.py" "$case_dir/alike.keyring" 10000 'alike-pw' --shared
    printf 'alike-pw\n' | timeout 20 security import-secrets --keyring "$case_dir/alike.keyring" > "$case_dir/out"
    expect "import-secrets: 10000 added, 0 already there" "$(tail -1 "$case_dir/out")"
    secrets=$(security dump-keychain -d "$XDG_DATA_HOME/keychains/alike.keychain-db" | grep -A1 '^data:' | grep '^"secret-')
    expect 10000 "$(echo "$secrets" | wc -l)" "one item each"
    expect 10000 "$(echo "$secrets" | sort -u | wc -l)" "every secret"
    printf 'alike-pw\n' | timeout 20 security import-secrets --keyring "$case_dir/alike.keyring" > "$case_dir/out"
    expect "import-secrets: 0 added, 10000 already there" "$(tail -1 "$case_dir/out")"
    printf 'alike-pw\n' | timeout 20 security import-secrets -n --keyring "$case_dir/alike.keyring" > "$case_dir/out"
    expect "import-secrets: dry run: 0 would be added, 10000 already there; nothing was changed" "$(tail -1 "$case_dir/out")"
}

# --- hostile wallets and keyrings ----------------------------------------------------------

kwl_fixtures=$here/../kde/kwl-fixtures
kwl_password='kwl fixture pässword'
crafted_kwl() { "$py" "$here/crafted_kwl.py" "$@"; }
# in_time COMMAND...: the command under a time limit, so a run that waits forever fails the case
# (124) instead of holding the suite.
in_time() { timeout 60 "$@"; }

# Whoever named a file can make it a FIFO: open(2) would wait for a writer forever. Each is
# refused at once as what it is, one line, 220 (errSecIO), and nothing is made. A run still
# waiting at the time limit gives no line, and the case fails.
fifo_sources() {
    mkfifo "$case_dir/fifo.kwl" "$case_dir/fifo.keyring"
    result=$(printf 'pw\n' | in_time bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --kwallet '$case_dir/fifo.kwl'") || true
    expect "220|security: import-secrets: $case_dir/fifo.kwl: not a regular file (a FIFO); refused unread (errSecIO)" "$result" "a FIFO as the wallet"
    result=$(printf 'pw\n' | in_time bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --keyring '$case_dir/fifo.keyring'") || true
    expect "220|security: import-secrets: $case_dir/fifo.keyring: not a regular file (a FIFO); refused unread (errSecIO)" "$result" "a FIFO as the keyring"
    # A real wallet (kwalletd5's) with a FIFO as its salt, then as its attributes file.
    cp "$kwl_fixtures/kdewallet.kwl" "$case_dir/salted.kwl"
    mkfifo "$case_dir/salted.salt"
    result=$(printf '%s\n' "$kwl_password" | in_time bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --kwallet '$case_dir/salted.kwl'") || true
    expect "220|security: import-secrets: $case_dir/salted.kwl: $case_dir/salted.salt: not a regular file (a FIFO); refused unread (errSecIO)" "$result" "a FIFO as the salt"
    cp "$kwl_fixtures/kdewallet.kwl" "$case_dir/attributed.kwl"
    cp "$kwl_fixtures/kdewallet.salt" "$case_dir/attributed.salt"
    mkfifo "$case_dir/attributed_attributes.json"
    result=$(printf '%s\n' "$kwl_password" | in_time bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --kwallet '$case_dir/attributed.kwl'") || true
    expect "220|security: import-secrets: $case_dir/attributed.kwl: $case_dir/attributed_attributes.json: not a regular file (a FIFO); refused unread (errSecIO)" \
        "$result" "a FIFO as the attributes file"
    # In the wallets' folder, beside a good wallet: that one still comes.
    mkdir -p "$XDG_DATA_HOME/kwalletd"
    mkfifo "$XDG_DATA_HOME/kwalletd/a.kwl"
    cp "$kwl_fixtures/work.kwl" "$kwl_fixtures/work.salt" "$XDG_DATA_HOME/kwalletd/"
    result=$(printf 'work password\n' | in_time bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --kwallets") || true
    expect "220|security: import-secrets: $XDG_DATA_HOME/kwalletd/a.kwl: not a regular file (a FIFO); refused unread (errSecIO)" \
        "$(echo "$result" | grep -v '^security: import-secrets: created the keychain')" "a FIFO among the wallets"
    [ -e "$XDG_DATA_HOME/keychains/work.keychain-db" ]
    for name in fifo salted attributed a; do [ ! -e "$XDG_DATA_HOME/keychains/$name.keychain-db" ]; done
}

# Folder and key names, labels and file names are the file's author's: an escape sequence in one
# reaches the terminal as text (\xHH), in the dry run's lines and in the error lines alike.
escaped_names() {
    local folder=$'\e]0;owned\aMail\e[2J' key=$'\e[1A\e[Kkey\xc2\x9b' escaped out err
    escaped='\x1B]0;owned\x07Mail\x1B[2J/\x1B[1A\x1B[Kkey\x9B'
    mkdir "$case_dir/a" "$case_dir/b"
    crafted_kwl "$case_dir/a/crafted.kwl" pw "$folder" "$key" one
    crafted_kwl "$case_dir/b/crafted.kwl" pw "$folder" "$key" two
    printf 'pw\n' | in_time security import-secrets -n --kwallet "$case_dir/a/crafted.kwl" > "$case_dir/out"
    absent $'\e' "$case_dir/out"
    absent $'\xc2\x9b' "$case_dir/out"
    grep -qxF "would add    $case_dir/a/crafted.kwl: $escaped" "$case_dir/out"
    printf 'pw\n' | in_time security import-secrets --kwallet "$case_dir/a/crafted.kwl" > "$case_dir/out"
    # The same folder and key with another value: the keychain's is kept, one error line.
    result=$(printf 'pw\n' | in_time bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --kwallet '$case_dir/b/crafted.kwl'")
    err=${result#*|}
    expect 45 "${result%%|*}"
    absent $'\e' <<< "$err"
    echo "$err" | grep -qF "security: import-secrets: $case_dir/b/crafted.kwl: $escaped: "
    # A file name with an escape sequence, in the wrong password's line and the prompt's.
    crafted_kwl "$case_dir/"$'\e[2J\e[Hwallet.kwl' pw "$folder" "$key" one
    result=$(printf 'wrong\n' | in_time bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --kwallet '$case_dir/'$'\e[2J\e[Hwallet.kwl'")
    expect "51|security: import-secrets: $case_dir/\\x1B[2J\\x1B[Hwallet.kwl: wrong password for this wallet (or its encrypted part is damaged) (errSecAuthFailed)" "$result"
    # A keyring file's name likewise.
    printf 'not a keyring\n' > "$case_dir/"$'\e]2;title\a.keyring'
    result=$(in_time bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --keyring '$case_dir/'$'\e]2;title\a.keyring'")
    expect 93 "${result%%|*}"
    absent $'\e' <<< "${result#*|}"
    echo "$result" | grep -qF "$case_dir/\\x1B]2;title\\x07.keyring: "
}

# kwalletd writes "/" in a wallet's name as ";2F" in its file's name: a file's author would choose
# where a keychain is made (with a password the author knows), and put it on the search list. A
# name that is not a plain one is refused: nothing is made, outside the keychains folder or in it.
wallet_names_stay_in_the_folder() {
    local outside=$case_dir/outside dir before file
    mkdir -p "$outside" "$case_dir/x/y/z" "$XDG_DATA_HOME/keychains"
    printf 'pw\n' | security create-keychain
    before=$(security list-keychains)
    # "../../evil", resolved from the working folder; and an absolute path (as ";2Ftmp;2Fx" is).
    dir=$case_dir/x/y/z
    crafted_kwl "$dir/..;2F..;2Fevil.kwl" pw Mail key one
    crafted_kwl "$dir/$(printf '%s' "$outside/abs" | sed 's|/|;2F|g').kwl" pw Mail key one
    crafted_kwl "$dir/..;2Fup.keychain.kwl" pw Mail key one
    crafted_kwl "$dir/nul;00.kwl" pw Mail key one
    for file in "$dir"/*.kwl; do
        if (cd "$dir" && printf 'pw\n' | in_time security import-secrets -n --kwallet "$file") > "$case_dir/out" 2> "$case_dir/err"; then
            echo "the dry run of $file went on:"; cat "$case_dir/out"; return 1
        fi
        absent 'would create' "$case_dir/out"
        result=$(cd "$dir" && printf 'pw\n' | in_time bash -c "$(declare -f status_and_stderr); status_and_stderr security import-secrets --kwallet '$file'")
        expect 206 "${result%%|*}" "$file"
        echo "$result" | grep -qF "is not a plain name for a keychain"
    done
    for file in "$case_dir/x/evil" "$outside/abs" "$case_dir/x/y/up.keychain" "$XDG_DATA_HOME/keychains/nul"; do
        [ ! -e "$file" ] || { echo "made $file"; return 1; }
    done
    expect "$before" "$(security list-keychains)" "the search list"
    expect "" "$(find "$case_dir" -name '*keychain-db*' ! -path "$XDG_DATA_HOME/keychains/login.keychain-db")" "no keychain made"
    expect "login.keychain-db" "$(ls "$XDG_DATA_HOME/keychains")"
}

# --- the suite ------------------------------------------------------------------------------

if [ -n "$inner" ]; then
    set -e
    "$@"
    exit
fi

libsecret_dir=$(mktemp -d /tmp/import-libsecret-XXXXXX)
fixtures=
trap 'rm -rf "$libsecret_dir" ${fixtures:+"$fixtures"}' EXIT
libsecret_src=/usr/share/doc/git/contrib/credential/libsecret
if make -s -C "$libsecret_dir" -f "$libsecret_src/Makefile" VPATH="$libsecret_src" >/dev/null 2>&1; then
    export LIBSECRET_HELPER=$libsecret_dir/git-credential-libsecret
else
    echo "note: git-credential-libsecret could not be built from $libsecret_src; git's attributes are stored with secret-tool"
fi
make_keyrings
# The items are a second old at least when imported, so kept dates cannot pass for new ones.
sleep 1.1

check "gnome-keyring-daemon wrote login, Work (binary) and Plain (text) keyrings" daemon_wrote_the_files
check "login.keyring: every item found by security, git and the Secret Service, as gnome-keyring showed it; a second import changes nothing" login_keyring
check "--keyrings: dry run, plain-text keyring, default file, each keychain; a second run adds nothing" keyrings_folder
check "a locked keychain: the keyring's password, else the keychain's own" locked_keychain_with_another_password
check "wrong password: one line, 51, the other keyrings still come" wrong_password
check "truncated, short, 10^9-iteration and junk files: one line, 93, at once" truncated_and_hostile_files
check "10,000 look-alikes (one attribute set, a secret each): all come, in linear time; a second run adds none" look_alikes_in_linear_time
check "git credential-store files: helper finds each, skipped lines said, second run adds nothing, files unchanged" git_credential_store
check "docker config.json: dry run, backup 0600, credsStore, helper finds each, second run adds nothing" docker_config
check "progress only when stderr is a terminal" progress_only_on_a_terminal
check "--all: keyrings first, then git and docker into the default keychain" everything_at_once
check "a FIFO as a wallet, its .salt or _attributes.json, or a keyring: one line, 220, at once" fifo_sources
check "escape sequences in a wallet's names and a file's name: shown escaped, dry run and errors" escaped_names
check "a wallet's name with \";2F\" (\"/\") or \";00\": refused, 206; no keychain made, the search list unchanged" wallet_names_stay_in_the_folder
summary
