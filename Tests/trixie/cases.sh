#!/usr/bin/env bash
# The cases of Tests/trixie/run.sh, run inside the trixie root as its throwaway user, whose
# systemd user manager and session bus run (see run.sh): `bash cases.sh CASE`, the case's status
# its own. The package's programs are in /keychain/bin (first on PATH), the checkout in
# /keychain/src.
set -euo pipefail
[ -z "${TRIXIE_TRACE:-}" ] || set -x
src=/keychain/src
export KEYCHAIN_PINENTRY=$src/Tests/secret-service/pinentry.sh PINENTRY_ANSWERS=$HOME/answers PINENTRY_LOG=$HOME/pinentry.log
: > "$PINENTRY_ANSWERS"
export XDG_CONFIG_HOME=$HOME/.config XDG_DATA_HOME=$HOME/.local/share XDG_STATE_HOME=$HOME/.local/state
mkdir -p "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_STATE_HOME"

# expect EXPECTED ACTUAL [WHAT]
expect() {
    [ "$1" = "$2" ] || { printf 'expected%s: %s\n     got: %s\n' "${3:+ ($3)}" "$1" "$2"; return 1; }
}

# said LINE FILE: FILE has LINE, whole.
said() { grep -qxF -- "$1" "$2" || { echo "not said: $1"; return 1; }; }

# What the user manager gives every user service (and the graphical session): its SSH_AUTH_SOCK.
manager_agent() { systemctl --user show-environment | sed -n 's/^SSH_AUTH_SOCK=//p'; }
# What a user service started now gets.
service_agent() { systemd-run --user --quiet --wait --pipe printenv SSH_AUTH_SOCK || true; }
# agent_empty SOCKET: the agent there answers, holding no key (ssh-add -l then exits 1).
agent_empty() {
    local said
    said=$(SSH_AUTH_SOCK=$1 ssh-add -l 2>&1) || true
    expect "The agent has no identities." "$said" "ssh-add -l through $1"
}
unit_state() { systemctl --user is-enabled "$1" 2>/dev/null || true; }
unit_active() { systemctl --user is-active "$1" 2>/dev/null || true; }

# The program that owns NAME on the session bus, or nothing.
bus_owner() {
    local pid
    pid=$(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.GetConnectionUnixProcessID "string:$1" 2>/dev/null | awk '/uint32/ { print $2 }')
    # Its command line's first word: /proc/PID/exe is unreadable for the keychain's service,
    # which makes itself undumpable.
    [ -n "$pid" ] && basename "$(tr '\0' '\n' < "/proc/$pid/cmdline" | head -n 1)"
    return 0
}

# wait_owner NAME PROGRAM: until PROGRAM owns NAME (20 s).
wait_owner() {
    local _
    for _ in $(seq 200); do [ "$(bus_owner "$1")" = "$2" ] && return 0; sleep 0.1; done
    echo "$1 is not provided by $2 (owner: $(bus_owner "$1"))"
    return 1
}

# The user's configuration as enable and disable may change it: path, type, link target, digest
# (not the keychains, which their use changes).
# kwalletd's wallet files are kwalletd's own data, which enable asks it to write out before it
# stops (closeAllWallets: each save draws a new IV), so they are named here and compared by what
# they hold (dump-native), not byte for byte.
snapshot() {
    (cd "$HOME" && find .config .local -path .local/share/keychains -prune -o -printf '%p %y %l\n' 2>/dev/null | sort | while read -r path type rest; do
        case $type:$path in
        f:.local/share/kwalletd/*.kwl) echo "$path $type" ;;
        f:*) echo "$path $type $(sha256sum < "$path" | cut -c1-16)" ;;
        *) echo "$path $type $rest" ;;
        esac
    done)
}

# --- cases ----------------------------------------------------------------------------------

# The programs the other cases meet are Debian 13's: said with their versions.
programs_are_debian_13s() {
    grep -q '^VERSION_CODENAME=trixie' /etc/os-release
    local versions
    versions=$(ssh -V 2>&1; dbus-daemon --version | head -1; systemctl --version | head -1
        dpkg-query -W -f '${Package} ${Version}\n' kwallet6 gnome-keyring gcr4 openssh-client)
    echo "$versions"
    grep -q '^OpenSSH_10\.' <<< "$versions"
    grep -q '^D-Bus Message Bus Daemon 1\.16\.' <<< "$versions"
    grep -q '^systemd 257 ' <<< "$versions"
    grep -q '^gnome-keyring 48\.' <<< "$versions"
    [ -x /usr/bin/kwalletd6 ] && [ -x /usr/libexec/gcr-ssh-agent ]
    # kwallet6 6.13 has no ksecretd (KWallet's Secret Service is kwalletd6's own here).
    if command -v ksecretd > /dev/null || [ -e /usr/libexec/ksecretd ]; then echo "ksecretd: shipped"; else echo "ksecretd: not shipped by Debian 13"; fi
    # The session as Debian 13 starts it: both agents' sockets, each setting SSH_AUTH_SOCK.
    expect active "$(unit_active gcr-ssh-agent.socket)" "gcr-ssh-agent.socket"
    expect active "$(unit_active ssh-agent.socket)" "OpenSSH's ssh-agent.socket"
}

# GNOME 48's gcr-ssh-agent and OpenSSH 10's own user ssh-agent.socket each set SSH_AUTH_SOCK for
# every user service. Once the user has enabled the keychain's agent, enable hands both over
# (stopped and masked) and the user's services get the keychain's agent; disable gives back
# exactly what was there: both unmasked and running again, the user's files as before.
gcr_and_openssh_agents_handed_over_and_back() {
    local before keychain=$XDG_RUNTIME_DIR/keychain/ssh-agent.socket
    case "$(manager_agent)" in
        "$XDG_RUNTIME_DIR/openssh_agent" | "$XDG_RUNTIME_DIR/gcr/ssh") ;;
        *) echo "Debian 13's session sets SSH_AUTH_SOCK to $(manager_agent), not to one of its agents"; return 1 ;;
    esac
    # gcr's agent answers (gcr-ssh-agent runs OpenSSH's ssh-agent behind its socket).
    agent_empty $XDG_RUNTIME_DIR/gcr/ssh
    agent_empty $XDG_RUNTIME_DIR/openssh_agent
    systemctl --user enable --now keychain-ssh-agent.socket
    before=$(snapshot)
    keychain-secret-service enable --no-import | tee "$HOME/enable.out"
    expect "$keychain" "$(manager_agent)" "the user manager's SSH_AUTH_SOCK after enable"
    expect "$keychain" "$(service_agent)" "a user service's SSH_AUTH_SOCK after enable"
    said 'stopped gcr-ssh-agent.socket and gcr-ssh-agent.service' "$HOME/enable.out"
    said 'stopped ssh-agent.socket and ssh-agent.service' "$HOME/enable.out"
    local unit
    for unit in gcr-ssh-agent.socket gcr-ssh-agent.service ssh-agent.socket ssh-agent.service; do
        expect masked "$(unit_state "$unit")" "$unit after enable"
        # (ssh-agent -D, stopped, exits with 2: "failed" is not running either.)
        [ "$(unit_active "$unit")" != active ] || { echo "$unit still runs after enable"; return 1; }
    done
    keychain-secret-service status > "$HOME/status"
    cat "$HOME/status"
    said "  ssh-agent.socket: masked ($XDG_CONFIG_HOME/systemd/user/ssh-agent.socket, by enable)" "$HOME/status"
    said "  gcr-ssh-agent.socket: masked ($XDG_CONFIG_HOME/systemd/user/gcr-ssh-agent.socket, by enable)" "$HOME/status"
    # The keychain's agent answers there (started by its socket).
    agent_empty $keychain

    keychain-secret-service disable | tee "$HOME/disable.out"
    for unit in gcr-ssh-agent.socket ssh-agent.socket; do
        expect enabled "$(unit_state "$unit")" "$unit after disable"
        expect active "$(unit_active "$unit")" "$unit after disable"
    done
    case "$(service_agent)" in
        "$XDG_RUNTIME_DIR/openssh_agent" | "$XDG_RUNTIME_DIR/gcr/ssh") ;;
        *) echo "after disable a user service gets SSH_AUTH_SOCK=$(service_agent), not Debian 13's agent"; return 1 ;;
    esac
    agent_empty $XDG_RUNTIME_DIR/gcr/ssh
    diff <(echo "$before") <(snapshot)
}

# OpenSSH 10's ssh-keygen, ssh-add and ssh against the keychain's agent (started by its socket as
# the package installs it), and OpenSSH 10's sshd authenticating the user by the agent's key.
# DSA is gone from OpenSSH 10: ssh-keygen makes no DSA key for the agent to be offered.
openssh_10_tools_with_the_agent() {
    local agent=$XDG_RUNTIME_DIR/keychain/ssh-agent.socket port type
    printf 'pw\n' | security create-keychain > /dev/null
    systemctl --user enable --now keychain-ssh-agent.socket
    export SSH_AUTH_SOCK=$agent
    mkdir -m 700 "$HOME/.ssh"
    for type in ed25519 ecdsa rsa; do
        ssh-keygen -q -t "$type" -N '' -C "$type-key" -f "$HOME/.ssh/id_$type"
        ssh-add "$HOME/.ssh/id_$type" 2>&1
    done
    ! ssh-keygen -q -t dsa -N '' -f "$HOME/dsa" 2> /dev/null
    expect active "$(unit_active keychain-ssh-agent.service)" "the keychain's agent, started by its socket"
    ssh-add -l | tee "$HOME/listed"
    expect 3 "$(wc -l < "$HOME/listed")" "keys the agent lists"
    for type in ed25519 ecdsa rsa; do
        grep -q " $type-key (" "$HOME/listed"
        # ssh-add -T: the agent signs with the key and ssh-add checks the signature.
        ssh-add -T "$HOME/.ssh/id_$type.pub"
    done
    # sshd 10 as the user itself on 127.0.0.1 (port from a free range), the agent's keys authorized.
    cat "$HOME"/.ssh/id_*.pub > "$HOME/.ssh/authorized_keys"
    ssh-keygen -q -t ed25519 -N '' -f "$HOME/host_key"
    port=$((20000 + RANDOM % 20000))
    printf '%s\n' "Port $port" "ListenAddress 127.0.0.1" "HostKey $HOME/host_key" "PidFile none" "UsePAM no" \
        "AuthorizedKeysFile $HOME/.ssh/authorized_keys" "PasswordAuthentication no" "KbdInteractiveAuthentication no" \
        "StrictModes no" > "$HOME/sshd_config"
    /usr/sbin/sshd -D -e -f "$HOME/sshd_config" 2> "$HOME/sshd.log" &
    sshd=$!
    trap 'kill $sshd 2>/dev/null' EXIT
    local _
    for _ in $(seq 100); do grep -q 'Server listening' "$HOME/sshd.log" && break; sleep 0.1; done
    for type in ed25519 ecdsa rsa; do
        # Only this key offered, and only through the agent (IdentitiesOnly with its public half).
        expect "$USER via $type" "$(ssh -F none -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
            -o IdentitiesOnly=yes -o IdentityFile="$HOME/.ssh/id_$type.pub" -p "$port" "$USER@127.0.0.1" "echo \$USER via $type" 2> "$HOME/ssh.log")" \
            "ssh with the agent's $type key" || { cat "$HOME/ssh.log" "$HOME/sshd.log"; return 1; }
    done
    ssh-add -d "$HOME/.ssh/id_rsa.pub"
    expect 2 "$(ssh-add -l | wc -l)" "keys after ssh-add -d"
    ssh-add -D
    agent_empty "$agent"
}

# KDE Plasma 6's kwalletd6 (which answers org.kde.kwalletd6 and, from the same activation,
# org.kde.kwalletd5), its wallet opened as pam_kwallet opens it at login and filled through
# KWallet's own API and kwalletd6's Secret Service: `import --from org.kde.kwalletd6` brings it
# whole; enable takes KWallet's names and the Secret Service from kwalletd6 (which KDE's programs
# then find answered by the keychain, every entry byte for byte); disable gives them back to
# kwalletd6 and the user's files as they were.
kwalletd6_import_enable_disable() {
    local kde="python3 $src/Tests/kde/kde.py" added
    # As Plasma leaves it: headless here, the desktop KDE, kwalletd6 past its first-use wizard.
    systemctl --user set-environment QT_QPA_PLATFORM=offscreen XDG_CURRENT_DESKTOP=KDE
    export QT_QPA_PLATFORM=offscreen XDG_CURRENT_DESKTOP=KDE
    printf '[Wallet]\nEnabled=true\nFirst Use=false\nLaunch Manager=false\n\n[org.freedesktop.secrets]\napiEnabled=true\n' \
        > "$XDG_CONFIG_HOME/kwalletrc"
    printf 'pw\n' | security create-keychain > /dev/null
    $kde pamopen kdewallet login-pw org.kde.kwalletd6 > /dev/null
    wait_owner org.kde.kwalletd6 kwalletd6
    wait_owner org.kde.kwalletd5 kwalletd6
    wait_owner org.freedesktop.secrets kwalletd6
    $kde fill kdewallet org.kde.kwalletd6
    printf 'ss-secret' | secret-tool store --label='Stored by secret-tool' service ss.example account ann
    KWALLET_SERVICE=org.kde.kwalletd6 $kde sync kdewallet
    # Its own entries (those its Secret Service made come over as Secret Service items).
    $kde dump-native kdewallet org.kde.kwalletd6 > "$HOME/native.before"
    [ -s "$HOME/native.before" ]

    keychain-secret-service import --from org.kde.kwalletd6 | tee "$HOME/import.out"
    added=$(tail -n 1 "$HOME/import.out" | sed -n 's/^import: \([0-9]*\) added, 0 already there$/\1/p')
    [ -n "$added" ] && [ "$added" -gt 0 ]
    keychain-secret-service import --from org.kde.kwalletd6 | tail -n 1 | grep -qx "import: 0 added, $added already there"
    expect ss-secret "$(security find-generic-password -l 'Stored by secret-tool' -w)" "the Secret Service item, imported"

    local before
    before=$(snapshot)
    keychain-secret-service enable | tee "$HOME/enable.out"
    grep -q '^KDE: XDG_CURRENT_DESKTOP is KDE' "$HOME/enable.out"
    grep -q '^stopped kwalletd6' "$HOME/enable.out"
    # Its wallets imported once, though it answers both KWallet names.
    expect 1 "$(grep -c '^importing the wallets of kwalletd6 ' "$HOME/enable.out")" "imports from kwalletd6"
    local name
    for name in org.kde.kwalletd6 org.kde.kwalletd5 org.freedesktop.secrets; do
        wait_owner "$name" keychain-secret-service
    done
    # KDE's programs now meet the keychain: the wallet's every entry through KWallet's API.
    $kde dump-native kdewallet org.kde.kwalletd6 > "$HOME/native.after"
    diff "$HOME/native.before" "$HOME/native.after"
    expect ss-secret "$(secret-tool lookup service ss.example account ann)" "secret-tool through the keychain"
    grep -qx 'apiEnabled=false' "$XDG_CONFIG_HOME/kwalletrc"

    keychain-secret-service disable | tee "$HOME/disable.out"
    grep -q '^org.kde.kwalletd6 is provided by kwalletd6 (pid [0-9]*) again$' "$HOME/disable.out"
    grep -q 'export --to org.kde.kwalletd6` copies it into KWallet$' "$HOME/disable.out"
    wait_owner org.kde.kwalletd6 kwalletd6
    diff <(echo "$before") <(snapshot)
    # kwalletd6 started again has its wallet closed: opened as the next login opens it.
    $kde pamopen kdewallet login-pw org.kde.kwalletd6 > /dev/null
    $kde dump-native kdewallet org.kde.kwalletd6 > "$HOME/native.back"
    diff "$HOME/native.before" "$HOME/native.back"
}

"$1"
