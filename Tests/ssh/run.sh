#!/usr/bin/env bash
# The SSH agent (issue 46) under the real OpenSSH tools: ssh-add, ssh, ssh-keygen and git against
# two sshd of the suite's own on 127.0.0.1 (their own configuration and host keys in a temporary
# folder, public keys only, no PAM) logging in a throwaway user. The agent under test is
# $AGENT, started with ssh-agent's command line: by default the keychain's, and
# `AGENT=/usr/bin/ssh-agent bash Tests/ssh/run.sh` runs the generic cases against OpenSSH's own
# agent, which they must also pass. The cases that need the keychain behind the agent (restart,
# login, a locked keychain, polkit) are skipped for any other agent.
# Usage: Tests/ssh/run.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BUILD=$(realpath -m "${1:-$repo/.build/debug}")
AGENT=${AGENT:-$BUILD/keychain-ssh-agent}
. "$here/../lib.sh"
py=/usr/bin/python3

if [ "$(id -u)" != 0 ]; then
    skip "the ssh suite makes users and runs sshd, and needs root"
    summary
    exit 0
fi
for tool in /usr/sbin/sshd ssh ssh-add ssh-keygen git setpriv timeout "$py"; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run make deps"; printf '\n0 passed, 1 failed\n'; exit 1; }
done
if [ ! -x "$AGENT" ]; then
    skip "no agent at $AGENT (build keychain-ssh-agent, or set AGENT=/usr/bin/ssh-agent)"
    summary
    exit 0
fi
AGENT=$(realpath "$AGENT")
ours=
[ "$(basename "$AGENT")" = keychain-ssh-agent ] && ours=1

base=$(mktemp -d /tmp/kc-ssh-XXXXXX)
chmod 755 "$base"
user=kcssh$$ other=kcsshx$$
# The PAM and polkit cases' user (it has a password) and PAM service, removed after each case.
login_user=kcsshp$$ pam_service=keychain-ssh-$$
home=$base/home
made_privsep=
cleanup() {
    local pid
    for pid in $(cat "$base/pids" 2>/dev/null); do kill "$pid" 2>/dev/null; done
    stop_broker
    rm -f "/etc/pam.d/$pam_service"
    for u in "$user" "$other" "$login_user"; do
        if id "$u" >/dev/null 2>&1; then
            pkill -KILL -u "$u" 2>/dev/null
            userdel -r "$u" >/dev/null 2>&1
        fi
    done
    [ -z "$made_privsep" ] || rmdir /run/sshd 2>/dev/null
    rm -rf "$base"
}
trap cleanup EXIT
# started PID: a process of the suite's own, killed at the end whatever happens.
started() { echo "$1" >> "$base/pids"; }

# sshd's privilege separation folder: Debian's is made by its service, which does not run here.
if [ ! -d /run/sshd ]; then mkdir -m 755 /run/sshd && made_privsep=1; fi

# The throwaway user sshd logs in: an unlocked account ('*': no password, but not '!', which sshd
# refuses), its keys in the default ~/.ssh/authorized_keys, which StrictModes checks up to $home.
useradd -m -d "$home" -s /bin/sh -p '*' "$user" || exit 1
useradd -M -d /nonexistent -s /usr/sbin/nologin "$other" || exit 1
cd /

# The keys, made once: each type the agent must sign with, an ed25519 key only a certificate of
# the suite's CA lets in, and the two sshd's host keys.
keys=$base/keys
mkdir -m 700 "$keys"
for spec in ed25519:ed25519 ecdsa256:"ecdsa -b 256" ecdsa384:"ecdsa -b 384" ecdsa521:"ecdsa -b 521" rsa:"rsa -b 3072" \
        certkey:ed25519 ca:ed25519 host1:ed25519 host2:ed25519 stranger:ed25519; do
    name=${spec%%:*}
    # shellcheck disable=SC2086 # the type and its size, as words
    ssh-keygen -q -t ${spec#*:} -N '' -C "$name@sshsuite" -f "$keys/$name" || exit 1
done
ssh-keygen -q -s "$keys/ca" -I sshsuite-cert -n "$user" -V -5m:+1h "$keys/certkey.pub" || exit 1
key_types=(ed25519 ecdsa256 ecdsa384 ecdsa521 rsa)

port=$(free_port)
port1=$port port2=$((port + 1))
mkdir -m 700 "$home/.ssh"
for k in "${key_types[@]}"; do cat "$keys/$k.pub"; done > "$home/.ssh/authorized_keys"
known_hosts=$base/known_hosts
{
    echo "[127.0.0.1]:$port1 $(cut -d' ' -f1,2 "$keys/host1.pub")"
    echo "[127.0.0.1]:$port2 $(cut -d' ' -f1,2 "$keys/host2.pub")"
} > "$known_hosts"
# The names `ssh-add -h` looks up (it resolves a destination to host keys through known_hosts).
named_hosts=$base/named_hosts
{
    echo "host1 $(cut -d' ' -f1,2 "$keys/host1.pub")"
    echo "host2 $(cut -d' ' -f1,2 "$keys/host2.pub")"
} > "$named_hosts"
cp "$known_hosts" "$home/.ssh/known_hosts"
chown -R "$user:" "$home"
chmod 600 "$home/.ssh/authorized_keys"
chmod 755 "$home"

# sshd N PORT: the Nth sshd, in the foreground under a timeout, killed by the trap.
start_sshd() {
    local n=$1 p=$2 config=$base/sshd$1.config
    cat > "$config" <<EOF
ListenAddress 127.0.0.1:$p
HostKey $keys/host$n
PidFile none
StrictModes yes
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
PermitRootLogin no
AllowUsers $user
AuthorizedKeysFile .ssh/authorized_keys
TrustedUserCAKeys $keys/ca.pub
AllowAgentForwarding yes
AllowTcpForwarding no
X11Forwarding no
PermitTTY no
LogLevel DEBUG1
SetEnv GIT_CONFIG_NOSYSTEM=1
EOF
    /usr/sbin/sshd -t -f "$config" || return 1
    timeout 900 /usr/sbin/sshd -D -e -f "$config" > "$base/sshd$n.log" 2>&1 &
    started $!
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "sshd $n never listened on $p"; cat "$base/sshd$n.log"
    return 1
}
start_sshd 1 "$port1" || exit 1
start_sshd 2 "$port2" || exit 1

# The askpass program for ssh-add -x/-X and ssh-agent's -c confirmation: answers with the
# passphrase in $base/passphrase, and to a confirmation per $base/confirm (yes or not).
askpass=$base/askpass
cat > "$askpass" <<EOF
#!/bin/sh
if [ "\${SSH_ASKPASS_PROMPT:-}" = confirm ]; then
    echo "\$*" >> "$base/confirm.log"
    [ "\$(cat "$base/confirm" 2>/dev/null)" = yes ]
    exit
fi
cat "$base/passphrase"
EOF
chmod 755 "$askpass"
export SSH_ASKPASS=$askpass SSH_ASKPASS_REQUIRE=force GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0

# The pinentry the keychain's agent asks before a -c key signs: a stand-in that speaks pinentry's
# protocol, records each question's description (as pinentry receives it: one Assuan line) in
# $base/pinentry.log, and answers each CONFIRM with the next line of $base/pinentry.answers
# (yes: Allow; anything else, or none: Deny), and each GETPIN with it as the passphrase (none, or
# no: Cancel).
pinentry=$base/pinentry
cat > "$pinentry" <<EOF
#!/bin/sh
echo "OK Pleased to meet you"
while IFS= read -r line; do
    case "\$line" in
        "SETDESC "*) printf '%s\\n' "\${line#SETDESC }" >> "$base/pinentry.log"; echo OK ;;
        CONFIRM)
            answer=\$(head -n 1 "$base/pinentry.answers" 2>/dev/null)
            sed -i 1d "$base/pinentry.answers" 2>/dev/null
            if [ "\$answer" = yes ]; then echo OK; else echo "ERR 83886179 Operation cancelled <Pinentry>"; fi ;;
        GETPIN)
            answer=\$(head -n 1 "$base/pinentry.answers" 2>/dev/null)
            sed -i 1d "$base/pinentry.answers" 2>/dev/null
            if [ -n "\$answer" ] && [ "\$answer" != no ]; then printf 'D %s\nOK\n' "\$answer"; else echo "ERR 83886179 Operation cancelled <Pinentry>"; fi ;;
        BYE) echo OK; exit 0 ;;
        *) echo OK ;;
    esac
done
EOF
chmod 755 "$pinentry"
export KEYCHAIN_PINENTRY=$pinentry
unset DISPLAY SSH_AUTH_SOCK SSH_AGENT_PID

# What every ssh of the suite runs with: no configuration, this suite's known hosts only, no key
# file (a name that does not exist), so that a login proves the agent signed.
ssh_options="-F /dev/null -o BatchMode=yes -o IdentitiesOnly=no -o IdentityFile=$base/no-key-file \
-o UserKnownHostsFile=$known_hosts -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes \
-o PreferredAuthentications=publickey -o ConnectTimeout=5 -o ControlMaster=no -o UpdateHostKeys=no -o LogLevel=ERROR"
# The same, as the user runs it inside a session on host 1.
remote_ssh="ssh ${ssh_options//$known_hosts/$home/.ssh/known_hosts}"

# ssh_to N [OPTIONS...] [COMMAND]: a login on sshd N through the agent.
ssh_to() {
    local n=$1 p; shift
    p=$port1; [ "$n" = 2 ] && p=$port2
    # shellcheck disable=SC2086 # the options, as words
    timeout 30 ssh $ssh_options -p "$p" "$@" "$user@127.0.0.1" "${remote_command:-true}"
}
login() { ssh_to "$@" < /dev/null; }
# logged_since LINE PATTERN: sshd 1 logged a line matching PATTERN after its line LINE (within 5 s).
logged_since() {
    for _ in $(seq 50); do
        grep -q -- "$2" <<< "$(tail -n +"$(($1 + 1))" "$base/sshd1.log")" && return 0
        sleep 0.1
    done
    echo "sshd logged no line matching: $2"; tail -n +"$(($1 + 1))" "$base/sshd1.log" | grep -v 'debug2\|debug3'
    return 1
}
# Fails when the command succeeds (`! cmd` never fails a case: set -e ignores it).
refute() { if "$@"; then echo "unexpectedly true: $*"; return 1; fi; }
add() { timeout 20 ssh-add "$@" 2>&1; }
listed() { timeout 20 ssh-add -l; }
fingerprint() { ssh-keygen -lf "$1" | cut -d' ' -f2; }

keychain_password=Keychain-pass-1
fresh() {
    case_dir=$(mktemp -d "$base/case-XXXXXX")
    export HOME=$case_dir/home XDG_DATA_HOME=$case_dir/home/.local/share XDG_CONFIG_HOME=$case_dir/home/.config \
        XDG_RUNTIME_DIR=$case_dir/run
    mkdir -p "$HOME" "$XDG_DATA_HOME" "$XDG_CONFIG_HOME"
    mkdir -m 700 "$XDG_RUNTIME_DIR"
    # The user keys (not the CA's nor the hosts'), which cases delete once the agent has them.
    k=$case_dir/keys
    mkdir -m 700 "$k"
    cp -p "$keys"/{ed25519,ecdsa,rsa,certkey,stranger}* "$k/"
    echo no > "$base/confirm"
    : > "$base/confirm.log"
    : > "$base/pinentry.log"
    : > "$base/pinentry.answers"
    echo "Lock-pass-1" > "$base/passphrase"
    # A case run with `brokered=1`: the keychain kept by the suite's broker, and the agent its
    # deputy (a copy the broker can identify), asking through the stand-in answerer.
    brokered_agent=
    if [ -n "${brokered:-}" ]; then
        export KEYCHAIN_BROKER_SOCKET=$broker_socket KEYCHAIN_ACCESS_ANSWERER=$bk/bin/answer
        brokered_agent=$bk/bin/keychain-ssh-agent
        echo deny > "$bk/answer.mode"
        rm -f "$bk/questions"
    fi
    if [ -n "$ours" ]; then
        printf '%s\n' "$keychain_password" | "$BUILD/security" create-keychain "$XDG_DATA_HOME/keychains/login.keychain-db" >/dev/null 2>&1
    fi
    start_agent
}
# start_agent: the agent in the foreground (-D), as a service manager runs it, on a socket of
# the case's; its pid in agent_pid.
start_agent() {
    export SSH_AUTH_SOCK=$case_dir/agent.sock
    "${brokered_agent:-$AGENT}" -D -a "$SSH_AUTH_SOCK" > "$case_dir/agent.out" 2>&1 &
    agent_pid=$!
    started "$agent_pid"
    for _ in $(seq 100); do [ -S "$SSH_AUTH_SOCK" ] && return 0; sleep 0.05; done
    echo "the agent made no socket"; cat "$case_dir/agent.out"
    return 1
}
stop_agent() {
    kill "$agent_pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$agent_pid" 2>/dev/null || break; sleep 0.05; done
    # A case's subshell restarting the agent has no such child to wait for.
    wait "$agent_pid" 2>/dev/null || true
}
finish() {
    stop_agent
    [ -z "$ours" ] || { remove_login_user; rm -f "/etc/pam.d/$pam_service"; }
    unset SSH_AUTH_SOCK
    if [ -n "$ours" ]; then
        for kc in "$XDG_DATA_HOME"/keychains/*.keychain-db; do
            [ -e "$kc" ] && "$BUILD/security" delete-keychain "$kc" >/dev/null 2>&1
        done
    fi
    unset KEYCHAIN_BROKER_SOCKET KEYCHAIN_ACCESS_ANSWERER
    rm -rf "$case_dir"
}

# --- a broker keeping the keychain (issue 55: the agent as its deputy) -------------------------

# The suite's keychain-broker, as Tests/broker runs it: a throwaway system user, setpriv with
# CAP_SYS_PTRACE only, copies of the broker and the agent under /run (a program in a folder the
# user may write to is never identified, and the broker must know the agent as its deputy).
bk='' broker_user=kcsshb$$ broker_pid='' broker_socket=''
start_broker() {
    local group=tss
    bk=$(mktemp -d /run/kc-ssh-broker-XXXXXX)
    chmod 755 "$bk"
    broker_socket=$bk/run/socket
    getent group tss >/dev/null || group=$broker_user
    if [ "$group" = tss ]; then
        useradd -r -M -d /nonexistent -s /usr/sbin/nologin -g tss "$broker_user" || return 1
    else
        useradd -r -M -d /nonexistent -s /usr/sbin/nologin -U "$broker_user" || return 1
    fi
    mkdir -p "$bk/bin" "$bk/run" "$bk/state" "$bk/pins"
    cp "$BUILD/keychain-broker" "$BUILD/keychain-ssh-agent" /usr/bin/ssh-add "$bk/bin/"
    # The broker's question goes only to a pinentry that is root's in root's folders (the user
    # could name another, which would be given the keychain's password): a copy of the stand-in.
    cp "$pinentry" "$bk/bin/pinentry"
    # The stand-in answerer: each question appended to $bk/questions, the answer per
    # $bk/answer.mode (always, with the keychain's password; anything else denies).
    cat > "$bk/bin/answer" <<EOS
#!/bin/sh
cat >> "$bk/questions"
echo ---- >> "$bk/questions"
if [ "\$(cat "$bk/answer.mode")" = always ]; then printf 'always\\n%s\\n' "$keychain_password"; else echo deny; fi
EOS
    chmod 755 "$bk/bin"/*
    chown "$broker_user:$group" "$bk/run" "$bk/state" "$bk/pins"
    chmod 700 "$bk/state" "$bk/pins"
    setpriv --reuid="$broker_user" --regid="$group" --clear-groups --inh-caps=-all,+sys_ptrace --ambient-caps=+sys_ptrace \
        --bounding-set=-all,+sys_ptrace --no-new-privs \
        "$bk/bin/keychain-broker" --socket "$broker_socket" --state "$bk/state" --pins "$bk/pins" \
        --deputy "$bk/bin/keychain-ssh-agent" --foreground 2>>"$bk/broker.log" &
    broker_pid=$!
    for _ in $(seq 400); do
        [ -S "$broker_socket" ] && return 0
        kill -0 "$broker_pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "the broker did not start:"; cat "$bk/broker.log"
    return 1
}
stop_broker() {
    if [ -n "$broker_pid" ]; then
        kill -TERM "$broker_pid" 2>/dev/null
        wait "$broker_pid" 2>/dev/null
        broker_pid=
    fi
    if id "$broker_user" >/dev/null 2>&1; then
        keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s "$1")"' - "$(id -u "$broker_user")" >/dev/null 2>&1
        userdel "$broker_user" >/dev/null 2>&1
        getent group "$broker_user" >/dev/null && groupdel "$broker_user" 2>/dev/null
    fi
    [ -z "$bk" ] || rm -rf "$bk"
    bk=
}
# What the broker logged of this user's item keys (the keychain's callers, as the broker saw them).
access_log() { "$BUILD/security" access-log; }

# --- the agent's command line ---------------------------------------------------------------

# `eval "$(AGENT -s)"` as scripts do, and `AGENT -k` ends it.
case_command_line() {
    local sock=$case_dir/other.sock out
    out=$(timeout 10 "$AGENT" -s -a "$sock")
    grep -E "^SSH_AUTH_SOCK=$sock; export SSH_AUTH_SOCK;$" <<< "$out"
    grep -E '^SSH_AGENT_PID=[0-9]+; export SSH_AGENT_PID;$' <<< "$out"
    eval "$out"
    started "$SSH_AGENT_PID"
    kill -0 "$SSH_AGENT_PID"
    expect "$sock" "$SSH_AUTH_SOCK"
    out=$(listed 2>&1) || true
    expect "The agent has no identities." "$out"
    [ "$(stat -c %a "$sock")" = 600 ]
    out=$(timeout 10 "$AGENT" -k)
    grep -E "^unset SSH_AUTH_SOCK;" <<< "$out"
    for _ in $(seq 100); do kill -0 "$SSH_AGENT_PID" 2>/dev/null || break; sleep 0.05; done
    refute kill -0 "$SSH_AGENT_PID" 2>/dev/null
    [ ! -e "$sock" ]
}

# --- logins with each key type ---------------------------------------------------------------

# case_login TYPE [ALGORITHMS...]: no login before the key is in the agent; after `ssh-add` and
# with the key files gone, a login (with each of the signature algorithms named).
case_login() {
    local type=$1 algorithm; shift
    refute login 1
    add "$k/$type"
    expect "$(fingerprint "$k/$type.pub")" "$(listed | cut -d' ' -f2)"
    rm -f "$k/$type" "$k/$type.pub"
    login 1
    for algorithm in "$@"; do
        mark=$(wc -l < "$base/sshd1.log")
        login 1 -o PubkeyAcceptedAlgorithms="$algorithm"
        # sshd's debug line names the algorithm of the signature it checked (written by another
        # of sshd's processes, which may come a moment after the login).
        logged_since "$mark" "userauth_pubkey: .*pkalg $algorithm "
    done
}

# --- ssh-add: -l, -L, -d, -D, -x/-X, -t, -c ---------------------------------------------------

case_list_and_delete() {
    local t
    for t in "${key_types[@]}"; do add "$k/$t"; done
    expect 5 "$(listed | wc -l)" "five keys listed"
    expect "$(for t in "${key_types[@]}"; do fingerprint "$k/$t.pub"; done | sort)" "$(listed | cut -d' ' -f2 | sort)"
    expect "$(cat "$k"/{ed25519,ecdsa256,ecdsa384,ecdsa521,rsa}.pub | sort)" "$(timeout 20 ssh-add -L | sort)" "ssh-add -L"
    rm -f "$k"/{ed25519,ecdsa256,ecdsa384,ecdsa521,rsa}
    add -d "$k/ed25519.pub"
    expect 4 "$(listed | wc -l)" "four keys after -d"
    refute grep -q "$(fingerprint "$k/ed25519.pub")" <<< "$(listed)"
    refute login 1 -o PubkeyAcceptedAlgorithms=ssh-ed25519
    login 1 -o PubkeyAcceptedAlgorithms=ecdsa-sha2-nistp384
    refute add -d "$k/stranger.pub"
    add -D
    expect "The agent has no identities." "$(listed 2>&1)"
    refute login 1
}

# start_second_agent: another agent as the first is started (for ours, on the same keychain), on
# the socket $second_sock.
start_second_agent() {
    second_sock=$case_dir/second.sock
    "$AGENT" -D -a "$second_sock" > "$case_dir/second.out" 2>&1 &
    second_pid=$!
    started "$second_pid"
    for _ in $(seq 100); do [ -S "$second_sock" ] && return 0; sleep 0.05; done
    echo "the second agent made no socket"; cat "$case_dir/second.out"
    return 1
}

# OpenSSH's agent.sh: two agents hold the same keys, `ssh-add -D` on one leaves the other's, and a
# key removed with -d or -D is added again without complaint.
case_two_agents_unload() {
    start_second_agent
    add "$k/ed25519"
    add "$k/ecdsa256"
    SSH_AUTH_SOCK=$second_sock add "$k/ed25519"
    SSH_AUTH_SOCK=$second_sock add "$k/ecdsa256"
    add -D
    expect "The agent has no identities." "$(listed 2>&1)"
    refute login 1
    expect 2 "$(SSH_AUTH_SOCK=$second_sock listed | wc -l)" "keys left in the second agent"
    SSH_AUTH_SOCK=$second_sock login 1
    SSH_AUTH_SOCK=$second_sock add -d "$k/ecdsa256.pub"
    expect 1 "$(SSH_AUTH_SOCK=$second_sock listed | wc -l)" "the second agent with one key left"
    add "$k/ed25519"
    add "$k/ecdsa256"
    expect 2 "$(listed | wc -l)" "both keys back in the first agent, once each"
    login 1 -o PubkeyAcceptedAlgorithms=ecdsa-sha2-nistp256
    add -d "$k/ed25519.pub"
    add "$k/ed25519"
    expect 2 "$(listed | wc -l)" "a key removed with -d, added again"
    SSH_AUTH_SOCK=$second_sock login 1 -o PubkeyAcceptedAlgorithms=ssh-ed25519
}

case_lock() {
    add "$k/ed25519"
    rm -f "$k/ed25519"
    add -x
    expect "The agent has no identities." "$(listed 2>&1)" "listing while locked"
    refute login 1
    echo "Wrong-pass" > "$base/passphrase"
    refute add -X
    refute login 1
    echo "Lock-pass-1" > "$base/passphrase"
    add -X
    expect "$(fingerprint "$k/ed25519.pub")" "$(listed | cut -d' ' -f2)"
    login 1
}

case_lifetime() {
    local gone=
    add -t 2 "$k/ed25519"
    rm -f "$k/ed25519"
    expect "$(fingerprint "$k/ed25519.pub")" "$(listed | cut -d' ' -f2)"
    for _ in $(seq 100); do
        if ! listed >/dev/null 2>&1; then gone=1; break; fi
        sleep 0.1
    done
    [ -n "$gone" ] || { echo "the key outlived its 2 s"; return 1; }
    refute login 1
}

# ssh-agent asks through SSH_ASKPASS in its own environment (the suite's askpass, which answers
# per $base/confirm); the keychain's agent asks pinentry (case_confirm_names).
case_confirm_askpass() {
    add -c "$k/ed25519"
    rm -f "$k/ed25519"
    refute login 1
    grep -q . "$base/confirm.log"
    echo yes > "$base/confirm"
    login 1
}

# --- -h: destination constraints (session-bind@openssh.com) -----------------------------------

case_destination() {
    # Both hosts let the user in with an unconstrained key.
    add "$k/ecdsa256"
    login 2
    add -d "$k/ecdsa256.pub"
    add -H "$named_hosts" -h "$user@host1" "$k/ed25519"
    rm -f "$k/ed25519"
    login 1
    refute login 2
    grep -q "ed25519" <<< "$(listed)"
    # Forwarded to host 1 and used there for a hop host 1 > host 1 that no constraint permits.
    remote_command="$remote_ssh -p $port1 $user@127.0.0.1 true" refute login 1 -A
}

# A hop that a constraint permits works through the forwarded agent; one to another host does not.
case_destination_hop() {
    add -H "$named_hosts" -h "$user@host1" -h "host1>$user@host1" "$k/ed25519"
    rm -f "$k/ed25519"
    remote_command="$remote_ssh -p $port1 $user@127.0.0.1 true" login 1 -A
    remote_command="$remote_ssh -p $port2 $user@127.0.0.1 true" refute login 1 -A
    refute login 2
}

# --- a certificate ----------------------------------------------------------------------------

case_certificate() {
    # certkey is in no authorized_keys: only its certificate from the CA sshd trusts lets it in.
    add "$k/certkey"
    grep -q "(ED25519-CERT)" <<< "$(listed)"
    expect 2 "$(listed | wc -l)" "the key and its certificate"
    rm -f "$k/certkey" "$k/certkey.pub" "$k/certkey-cert.pub"
    mark=$(wc -l < "$base/sshd1.log")
    login 1
    logged_since "$mark" "Accepted publickey for $user .*ED25519-CERT .*ID sshsuite-cert"
}

# --- forwarding -------------------------------------------------------------------------------

case_forwarding() {
    local out
    add "$k/ecdsa256"
    rm -f "$k/ecdsa256"
    out=$(remote_command='ssh-add -l' login 1 -A)
    grep -q "$(fingerprint "$k/ecdsa256.pub")" <<< "$out"
    out=$(remote_command="$remote_ssh -p $port1 $user@127.0.0.1 'echo second hop'" login 1 -A)
    expect "second hop" "$out"
    remote_command='ssh-add -l' refute login 1
}

# --- git --------------------------------------------------------------------------------------

case_git_over_ssh() {
    local url=ssh://$user@127.0.0.1:$port1$home/repo.git work=$case_dir/work
    setpriv --reuid="$user" --regid="$user" --init-groups env -i HOME="$home" GIT_CONFIG_NOSYSTEM=1 \
        git init -q --bare "$home/repo.git"
    add "$k/ed25519"
    rm -f "$k/ed25519"
    export GIT_SSH_COMMAND="ssh $ssh_options" GIT_AUTHOR_NAME=Suite GIT_AUTHOR_EMAIL=suite@example.invalid \
        GIT_COMMITTER_NAME=Suite GIT_COMMITTER_EMAIL=suite@example.invalid
    timeout 60 git clone -q "$url" "$work" 2>&1
    echo hello > "$work/file"
    git -C "$work" add file
    git -C "$work" commit -q -m first
    timeout 60 git -C "$work" push -q origin HEAD:refs/heads/main 2>&1
    timeout 60 git clone -q -b main "$url" "$case_dir/again" 2>&1
    expect hello "$(cat "$case_dir/again/file")"
    add -D
    refute timeout 60 git -C "$work" fetch -q origin
    rm -rf "$home/repo.git"
}

# --- signing ----------------------------------------------------------------------------------

case_commit_signing() {
    local work=$case_dir/work allowed=$case_dir/allowed_signers
    export GIT_AUTHOR_NAME=Suite GIT_AUTHOR_EMAIL=suite@example.invalid GIT_COMMITTER_NAME=Suite GIT_COMMITTER_EMAIL=suite@example.invalid
    add "$k/ed25519"
    rm -f "$k/ed25519"
    echo "suite@example.invalid namespaces=\"git\" $(cat "$k/ed25519.pub")" > "$allowed"
    git init -q "$work"
    echo signed > "$work/file"
    git -C "$work" add file
    git -C "$work" -c gpg.format=ssh -c user.signingkey="key::$(cat "$k/ed25519.pub")" commit -q -S -m signed
    grep -q 'Good "git" signature' <<< "$(git -C "$work" -c gpg.ssh.allowedSignersFile="$allowed" verify-commit HEAD 2>&1)"
    # With the path of the public key, and a tag.
    git -C "$work" -c gpg.format=ssh -c user.signingkey="$k/ed25519.pub" tag -s -m tag v1
    grep -q 'Good "git" signature' <<< "$(git -C "$work" -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$allowed" verify-tag v1 2>&1)"
    # Another signer is not allowed, and without the key in the agent there is no signature.
    echo "suite@example.invalid namespaces=\"git\" $(cat "$k/stranger.pub")" > "$case_dir/strangers"
    refute git -C "$work" -c gpg.ssh.allowedSignersFile="$case_dir/strangers" verify-commit HEAD 2>/dev/null
    add -D
    echo unsigned > "$work/file"
    refute git -C "$work" -c gpg.format=ssh -c user.signingkey="key::$(cat "$k/ed25519.pub")" commit -q -a -S -m no 2>/dev/null
}

case_file_signing() {
    local t data=$case_dir/data
    head -c 100000 /dev/urandom > "$data"
    for t in "${key_types[@]}"; do
        add "$k/$t"
        rm -f "$k/$t"
        rm -f "$data.sig"
        timeout 20 ssh-keygen -q -Y sign -f "$k/$t.pub" -n file "$data"
        echo "signer $(cat "$k/$t.pub")" > "$case_dir/allowed"
        timeout 20 ssh-keygen -Y verify -f "$case_dir/allowed" -I signer -n file -s "$data.sig" < "$data"
        refute timeout 20 ssh-keygen -Y verify -f "$case_dir/allowed" -I signer -n other -s "$data.sig" < "$data" 2>/dev/null
        refute timeout 20 ssh-keygen -Y verify -f "$case_dir/allowed" -I signer -n file -s "$data.sig" < "$keys/ca.pub" 2>/dev/null
    done
}

# --- bad input and other users ----------------------------------------------------------------

case_fuzz() {
    timeout 120 "$py" "$here/fuzz.py" "$SSH_AUTH_SOCK" "$agent_pid" "${SSH_FUZZ_COUNT:-10000}" 2>&1
}

case_other_user() {
    # The socket reachable by anyone on the file system: only the agent's own check stands.
    chmod 755 "$case_dir"
    chmod 666 "$SSH_AUTH_SOCK"
    # A copy the other user can read: the checkout may be one only root can enter (/root/...).
    install -m 0644 "$here/fuzz.py" "$case_dir/fuzz.py"
    setpriv --reuid="$other" --regid="$other" --init-groups env -i PATH=/usr/bin:/bin \
        timeout 20 "$py" "$case_dir/fuzz.py" --refused "$SSH_AUTH_SOCK"
    add "$k/ed25519"
    expect 1 "$(listed | wc -l)" "the agent's own user still served"
}

# --- with the keychain behind the agent -------------------------------------------------------

security() { "$BUILD/security" "$@"; }
login_keychain() { echo "$XDG_DATA_HOME/keychains/login.keychain-db"; }

case_survives_restart() {
    add "$k/ed25519"
    rm -f "$k/ed25519"
    stop_agent
    start_agent
    expect "$(fingerprint "$k/ed25519.pub")" "$(listed | cut -d' ' -f2)"
    login 1
}

case_locked_keychain() {
    add "$k/ed25519"
    rm -f "$k/ed25519"
    login 1
    security lock-keychain "$(login_keychain)"
    expect "$(fingerprint "$k/ed25519.pub")" "$(listed | cut -d' ' -f2)" "listed while locked"
    refute login 1
    security unlock-keychain -p "$keychain_password" "$(login_keychain)"
    login 1
}

# ssh-add -d and -D unload keys from this agent only: the keychain keeps them (security
# find-key), and the agent lists them again once restarted.
case_unload_keeps_the_keys() {
    add "$k/ed25519"
    add "$k/ecdsa256"
    add -d "$k/ed25519.pub"
    refute grep -q ed25519@sshsuite <<< "$(listed)"
    security find-key -l ed25519@sshsuite "$(login_keychain)" > /dev/null
    add -D
    expect "The agent has no identities." "$(listed 2>&1)"
    security find-key -l ecdsa256@sshsuite "$(login_keychain)" > /dev/null
    rm -f "$k/ed25519" "$k/ecdsa256"
    stop_agent
    start_agent
    expect 2 "$(listed | wc -l)" "both keys listed after a restart"
    login 1
}

# Deleting a key for good is security's job: gone from the keychain, so from every agent on it.
case_delete_ssh_key() {
    add "$k/ed25519"
    add "$k/ecdsa256"
    start_second_agent
    security delete-ssh-key ed25519@sshsuite 2> "$case_dir/delete.err"
    grep -q "$(fingerprint "$k/ed25519.pub") ed25519@sshsuite deleted" "$case_dir/delete.err"
    refute grep -q ed25519@sshsuite <<< "$(listed)"
    refute grep -q ed25519@sshsuite <<< "$(SSH_AUTH_SOCK=$second_sock listed)"
    refute grep -q ed25519@sshsuite <<< "$(security dump-keychain "$(login_keychain)")"
    refute security delete-ssh-key ed25519@sshsuite 2> /dev/null
    security delete-ssh-key "$(fingerprint "$k/ecdsa256.pub")" 2> /dev/null
    expect "The agent has no identities." "$(SSH_AUTH_SOCK=$second_sock listed 2>&1)"
}

# DSA: OpenSSH 9.2's agent takes it, ours does not (OpenSSH itself dropped it in 10.0); ssh-add's
# message is the one the man page gives.
case_dsa_refused() {
    local out
    ssh-keygen -q -t dsa -N '' -C dsa@sshsuite -f "$k/dsa"
    if out=$(add "$k/dsa"); then echo "a DSA key was added: $out"; return 1; fi
    expect "Could not add identity \"$k/dsa\": agent refused operation" "$out"
    grep -q "refusing to add a key: unsupported key type ssh-dss" "$case_dir/agent.out"
    grep -q "DSA" "$repo/man/keychain-ssh-agent.1.scd"
    grep -qF "Could not add identity \"KEY\": agent refused operation" "$repo/man/keychain-ssh-agent.1.scd"
}

case_key_item() {
    add "$k/ed25519"
    grep -q "ed25519@sshsuite" <<< "$(security dump-keychain "$(login_keychain)")"
    security find-key -l "ed25519@sshsuite" "$(login_keychain)"
    # -t keeps a key in memory only.
    add -t 60 "$k/ecdsa256"
    refute grep -q "ecdsa256@sshsuite" <<< "$(security dump-keychain "$(login_keychain)")"
}

# A user of its own with a password, and a folder it can read holding what it runs
# ($case_dir/stage): for the PAM and polkit cases, where the agent runs as that user.
make_login_user() {
    login_password=Login-pass-1 login_home=$case_dir/user-home stage=$case_dir/stage
    chmod 755 "$case_dir"
    mkdir -m 755 "$stage"
    cp "$AGENT" "$BUILD/security" "$stage/"
    useradd -m -d "$login_home" -s /bin/sh "$login_user"
    echo "$login_user:$login_password" | chpasswd
    cp "$k/ed25519" "$k/ed25519.pub" "$login_home/"
    chown "$login_user:" "$login_home"/ed25519*
}
remove_login_user() {
    id "$login_user" >/dev/null 2>&1 || return 0
    setpriv --reuid="$login_user" --regid="$login_user" --init-groups keyctl session - \
        sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1
    pkill -KILL -u "$login_user" 2>/dev/null
    userdel -r "$login_user" >/dev/null 2>&1
}
as_login_user() {
    setpriv --reuid="$login_user" --regid="$login_user" --init-groups env -i HOME="$login_home" PATH="$stage:/usr/bin:/bin" \
        SSH_AUTH_SOCK="$login_home/agent.sock" "$@"
}

# Logout and login through PAM: pam_keychain unlocks the user's login keychain with the password
# and locks it at the session's end; the agent, run as that user, lists the key it kept there
# while locked, and signs with it once the user is back.
case_login_session() {
    local restart=${1:-restart}
    local service=$pam_service user_agent
    make_login_user
    cp "$BUILD/libpam_keychain.so" "$stage/"
    cat > "/etc/pam.d/$service" <<PAM
auth     required  pam_unix.so
auth     optional  $stage/libpam_keychain.so
account  required  pam_unix.so
session  required  pam_unix.so
session  optional  $stage/libpam_keychain.so auto_create lock_on_close
PAM
    start_user_agent() {
        as_login_user "$stage/keychain-ssh-agent" -D -a "$login_home/agent.sock" > "$case_dir/user-agent.log" 2>&1 &
        for _ in $(seq 100); do [ -S "$login_home/agent.sock" ] && break; sleep 0.05; done
        # The agent itself, not the subshell that runs as_login_user in the background.
        user_agent=$(pgrep -n -u "$login_user" -f "keychain-ssh-agent -D -a") || return 1
        started "$user_agent"
    }
    stop_user_agent() { kill "$user_agent"; wait "$user_agent" 2>/dev/null || true; }
    user_login() {
        as_login_user timeout 30 ssh $ssh_options -p "$port1" "$user@127.0.0.1" true < /dev/null && return 0
        echo "the agent's log:"; cat "$case_dir/user-agent.log"; return 1
    }
    printf '%s\n' "$login_password" | pamtester "$service" "$login_user" authenticate open_session
    start_user_agent
    as_login_user timeout 20 ssh-add "$login_home/ed25519"
    rm -f "$login_home/ed25519"
    user_login
    [ "$restart" = keep ] || stop_user_agent
    pamtester "$service" "$login_user" close_session
    [ "$restart" = keep ] || start_user_agent
    expect "$(fingerprint "$k/ed25519.pub")" "$(as_login_user ssh-add -l | cut -d' ' -f2)" "listed after logout"
    refute user_login
    [ "$restart" = keep ] || stop_user_agent
    printf '%s\n' "$login_password" | pamtester "$service" "$login_user" authenticate open_session
    [ "$restart" = keep ] || start_user_agent
    user_login
    stop_user_agent
}

# security import-ssh-keys brings ~/.ssh/id_* in (an encrypted one asked once, the files left as
# they were), the agent signs with them at once; export-ssh-key gives one back in OpenSSH's format.
case_import_export() {
    mkdir -m 700 "$HOME/.ssh"
    cp "$k/ed25519" "$HOME/.ssh/id_ed25519"
    cp "$k/ecdsa256" "$HOME/.ssh/id_ecdsa"
    cp "$k/ecdsa256.pub" "$HOME/.ssh/id_ecdsa.pub"
    ssh-keygen -q -p -N "File-pass-1" -f "$HOME/.ssh/id_ecdsa"
    local before
    before=$(sha256sum "$HOME"/.ssh/id_*)
    printf 'File-pass-1\n' | security import-ssh-keys > "$case_dir/import.out"
    expect "$before" "$(sha256sum "$HOME"/.ssh/id_*)" "the key files, unchanged"
    grep -q "ed25519@sshsuite" <<< "$(listed)"
    grep -q "ecdsa256@sshsuite" <<< "$(listed)"
    rm -f "$k/ed25519" "$k/ecdsa256"
    login 1
    # A second run keeps the same keys, nothing more.
    printf 'File-pass-1\n' | security import-ssh-keys > /dev/null
    expect 2 "$(listed | wc -l)" "keys after a second import"
    printf 'Export-pass-1\nExport-pass-1\n' | security export-ssh-key -o "$case_dir/exported" ed25519@sshsuite
    expect "$(cut -d' ' -f1,2 "$k/ed25519.pub")" "$(ssh-keygen -y -P Export-pass-1 -f "$case_dir/exported" | cut -d' ' -f1,2)" \
        "the exported key's public half"
    refute ssh-keygen -y -P wrong -f "$case_dir/exported" 2> /dev/null
}

# A key made inside the TPM (swtpm here): it signs for ssh and ssh-keygen -Y through the agent,
# export has no private part to give, and the same keychain on another TPM cannot sign.
case_tpm_key() {
    command -v swtpm > /dev/null || { echo "swtpm is not installed"; return 1; }
    local tpm_a tpm_b line out status=0
    tpm_a=$(start_swtpm a)
    tpm_b=$(start_swtpm b)
    export KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$tpm_a"
    stop_agent
    start_agent
    line=$(security create-ssh-key --tpm -C tpm@sshsuite)
    grep -q "^ecdsa-sha2-nistp256 .* tpm@sshsuite$" <<< "$line"
    echo "$line" > "$case_dir/tpm.pub"
    expect "$(ssh-keygen -lf "$case_dir/tpm.pub" | cut -d' ' -f2)" "$(listed | cut -d' ' -f2)" "the TPM key, listed"
    # sshd knows it for this case only.
    cp "$home/.ssh/authorized_keys" "$case_dir/authorized_keys.saved"
    echo "$line" >> "$home/.ssh/authorized_keys"
    login 1 || status=$?
    cp "$case_dir/authorized_keys.saved" "$home/.ssh/authorized_keys"
    expect 0 "$status" "ssh with the TPM key"
    head -c 10000 /dev/urandom > "$case_dir/data"
    timeout 20 ssh-keygen -q -Y sign -f "$case_dir/tpm.pub" -n file "$case_dir/data"
    echo "signer $line" > "$case_dir/allowed"
    timeout 20 ssh-keygen -Y verify -f "$case_dir/allowed" -I signer -n file -s "$case_dir/data.sig" < "$case_dir/data"
    # No command gives its private part: export refuses (a backup holds only the TPM's blob).
    if out=$(printf '\n\n' | security export-ssh-key -o "$case_dir/tpm-exported" tpm@sshsuite 2>&1); then
        echo "exported: $out"
        return 1
    fi
    grep -q "inside the TPM" <<< "$out"
    [ ! -e "$case_dir/tpm-exported" ]
    # -d and -D unload it from this agent; nothing could make it again, so the keychain keeps it
    # (the restart below lists it).
    add -d "$case_dir/tpm.pub"
    refute grep -q "tpm@sshsuite" <<< "$(listed)"
    stop_agent
    start_agent
    grep -q "tpm@sshsuite" <<< "$(listed)"
    add -D
    expect "The agent has no identities." "$(listed 2>&1)"
    # The same keychain with another TPM: listed, but no signature.
    export KEYCHAIN_TPM_TCTI="swtpm:host=127.0.0.1,port=$tpm_b"
    stop_agent
    start_agent
    grep -q "tpm@sshsuite" <<< "$(listed)"
    refute timeout 20 ssh-add -T "$case_dir/tpm.pub" 2> /dev/null
    grep -q "another TPM" "$case_dir/agent.out"
    unset KEYCHAIN_TPM_TCTI
}

# start_swtpm NAME: a software TPM of the case's on a free port; prints the port.
start_swtpm() {
    local port dir=$case_dir/tpm-$1
    port=$(free_port)
    mkdir -p "$dir"
    timeout 600 swtpm socket --tpm2 --server type=tcp,port="$port",bindaddr=127.0.0.1 \
        --ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 --tpmstate dir="$dir" \
        --flags not-need-init,startup-clear > "$dir.log" 2>&1 &
    started "$!"
    for _ in $(seq 100); do
        TPM2TOOLS_TCTI="swtpm:host=127.0.0.1,port=$port" tpm2_getcap properties-fixed > /dev/null 2>&1 && break
        sleep 0.1
    done
    echo "$port"
}

# A -c key asks pinentry before each signature, and the question names the program (and its
# parents), the key (comment and fingerprint) and where the signature goes. Three requests that
# polkit's fixed message showed alike: the user's own ssh, another program, and a host the agent
# is forwarded to; each text differs, and a Deny fails the signature.
case_confirm_names() {
    local log=$base/pinentry.log answers=$base/pinentry.answers fp fp2 host1_fp own unknown first forwarded tool=$case_dir/bin/signer
    fp=$(fingerprint "$k/ed25519.pub") fp2=$(fingerprint "$k/ecdsa256.pub") host1_fp=$(fingerprint "$keys/host1.pub")
    add -c "$k/ed25519"
    rm -f "$k/ed25519"

    # The user's own ssh: denied, the login fails; allowed, it works.
    refute login 1
    expect 1 "$(wc -l < "$log")" "questions after one denied login"
    own=$(tail -n 1 "$log")
    grep -qF "/usr/bin/ssh wants to use your SSH key \"ed25519@sshsuite\" ($fp) to log in to the host with key $host1_fp." <<< "$own"
    grep -qF "%0AStarted by: /usr/bin/timeout, " <<< "$own"
    echo yes > "$answers"
    login 1

    # Another program (a copy of ssh-keygen elsewhere) signing a file: no host, its own path.
    mkdir "$case_dir/bin"
    cp /usr/bin/ssh-keygen "$tool"
    echo data > "$case_dir/data"
    refute timeout 20 "$tool" -q -Y sign -f "$k/ed25519.pub" -n file "$case_dir/data"
    unknown=$(tail -n 1 "$log")
    grep -qF "$tool wants to use your SSH key \"ed25519@sshsuite\" ($fp).%0AStarted by: /usr/bin/timeout, " <<< "$unknown"
    [ ! -e "$case_dir/data.sig" ]
    echo yes > "$answers"
    timeout 20 "$tool" -q -Y sign -f "$k/ed25519.pub" -n file "$case_dir/data"
    add -d "$k/ed25519.pub"

    # Through a forwarded agent: host1 may go on to host2 with this key; ssh on host1 asks through
    # the user's own ssh here, and the question says so. Allowed for host1 then denied for
    # host2, the login on host2 fails; both allowed, it works.
    add -c -H "$named_hosts" -h "$user@host1" -h "host1>$user@host2" "$k/ecdsa256"
    rm -f "$k/ecdsa256"
    : > "$log"
    printf 'yes\nno\n' > "$answers"
    remote_command="$remote_ssh -p $port2 $user@127.0.0.1 true" refute login 1 -A
    expect 2 "$(wc -l < "$log")" "questions for a login on host1 and its hop to host2"
    first=$(sed -n 1p "$log") forwarded=$(sed -n 2p "$log")
    grep -qF "/usr/bin/ssh wants to use your SSH key \"ecdsa256@sshsuite\" ($fp2) to log in to host1.%0A" <<< "$first"
    grep -qF "/usr/bin/ssh wants to use your SSH key \"ecdsa256@sshsuite\" ($fp2) to log in to host2 from host1 (your agent is forwarded there).%0A" <<< "$forwarded"
    printf 'yes\nyes\n' > "$answers"
    remote_command="$remote_ssh -p $port2 $user@127.0.0.1 true" login 1 -A

    # Three requests, three texts.
    expect 3 "$(printf '%s\n' "$own" "$unknown" "$forwarded" | sort -u | wc -l)" "different questions"
}

# A key's comment is chosen by whoever made the key: its escape sequences (here one that clears
# the line and writes a friendlier one) reach the person escaped, never as control characters.
# With no pinentry to ask, a -c key signs nothing, at once.
case_confirm_escapes() {
    local comment
    comment=$(printf 'evil\033[2K\r/usr/bin/ssh')
    ssh-keygen -q -t ed25519 -N '' -C "$comment" -f "$k/hostile"
    add -c "$k/hostile"
    echo "data" > "$case_dir/data"
    refute timeout 20 ssh-keygen -q -Y sign -f "$k/hostile.pub" -n file "$case_dir/data"
    grep -qF 'your SSH key "evil\x1B[2K\x0D/usr/bin/ssh" (' "$base/pinentry.log"
    refute grep -q "$(printf '[\001-\037]')" "$base/pinentry.log"
    stop_agent
    KEYCHAIN_PINENTRY=$case_dir/no-pinentry start_agent
    refute timeout 20 ssh-keygen -q -Y sign -f "$k/hostile.pub" -n file "$case_dir/data"
    grep -q "confirmation refused (unavailable" "$case_dir/agent.out"
}

# --- through a broker: the agent relays its client (issue 55) ---------------------------------

# Without the tests' answerer the agent asks pinentry, not polkit's fixed message: the broker's
# whole question (the program and its parents, the key, its fingerprint) as the description, Deny,
# Allow once or Always allow, then the keychain's password; Cancel denies.
case_broker_asks_through_pinentry() {
    local fp
    fp=$(fingerprint "$k/ed25519.pub")
    stop_agent
    unset KEYCHAIN_ACCESS_ANSWERER
    KEYCHAIN_PINENTRY=$bk/bin/pinentry start_agent
    add "$k/ed25519"
    rm -f "$k/ed25519"
    refute timeout 20 "$bk/bin/ssh-add" -T "$k/ed25519.pub"
    grep -F "ssh-add ($bk/bin/ssh-add) ← timeout ← " "$base/pinentry.log"
    grep -F ", through keychain-ssh-agent ($bk/bin/keychain-ssh-agent) wants to read" "$base/pinentry.log"
    grep -F "$bk/bin/ssh-add wants to use your SSH key \"ed25519@sshsuite\" ($fp)." "$base/pinentry.log"
    printf 'yes\n%s\n' "$keychain_password" > "$base/pinentry.answers"
    timeout 20 "$bk/bin/ssh-add" -T "$k/ed25519.pub"
    grep -E "allowed once: ssh-add \($bk/bin/ssh-add\)" <<< "$(access_log)"
    [ ! -e "$bk/questions" ]
}

# ssh logging in and git signing a commit (ssh-keygen -Y sign) are on a new key's list: the broker
# judges each (not the agent) and asks nothing, and its log names the program through the agent.
case_broker_trusted_clients() {
    local work=$case_dir/work allowed=$case_dir/allowed_signers log
    export GIT_AUTHOR_NAME=Suite GIT_AUTHOR_EMAIL=suite@example.invalid GIT_COMMITTER_NAME=Suite GIT_COMMITTER_EMAIL=suite@example.invalid
    add "$k/ed25519"
    rm -f "$k/ed25519"
    login 1
    echo "suite@example.invalid namespaces=\"git\" $(cat "$k/ed25519.pub")" > "$allowed"
    git init -q "$work"
    echo signed > "$work/file"
    git -C "$work" add file
    git -C "$work" -c gpg.format=ssh -c user.signingkey="key::$(cat "$k/ed25519.pub")" commit -q -S -m signed
    grep -q 'Good "git" signature' <<< "$(git -C "$work" -c gpg.ssh.allowedSignersFile="$allowed" verify-commit HEAD 2>&1)"
    [ ! -e "$bk/questions" ] || { echo "asked:"; cat "$bk/questions"; return 1; }
    log=$(access_log)
    grep -E "trusted: ssh \(/usr/bin/ssh\) .*, through keychain-ssh-agent \($bk/bin/keychain-ssh-agent\);" <<< "$log"
    grep -E "trusted: ssh-keygen \(/usr/bin/ssh-keygen\) ← git .*, through keychain-ssh-agent " <<< "$log"
}

# Another program (a copy of ssh-add the broker identifies, not on the list) is asked: the question
# names it, its parents, the key's comment and fingerprint. Deny fails the signature; "always"
# puts it on the list, and it then signs without a question.
case_broker_asks_other_program() {
    local fp question
    fp=$(fingerprint "$k/ed25519.pub")
    add "$k/ed25519"
    rm -f "$k/ed25519"
    refute timeout 20 "$bk/bin/ssh-add" -T "$k/ed25519.pub"
    question=$(cat "$bk/questions")
    grep -F "ssh-add ($bk/bin/ssh-add) ← " <<< "$question"
    grep -F ", through keychain-ssh-agent" <<< "$question"
    grep -F "$bk/bin/ssh-add wants to use your SSH key \"ed25519@sshsuite\" ($fp)." <<< "$question"
    grep -F "Started by: /usr/bin/timeout, " <<< "$question"
    grep -E "denied: ssh-add \($bk/bin/ssh-add\) .*, through keychain-ssh-agent " <<< "$(access_log)"
    echo always > "$bk/answer.mode"
    rm -f "$bk/questions"
    timeout 20 "$bk/bin/ssh-add" -T "$k/ed25519.pub"
    [ -e "$bk/questions" ]
    echo deny > "$bk/answer.mode"
    rm -f "$bk/questions"
    timeout 20 "$bk/bin/ssh-add" -T "$k/ed25519.pub"
    [ ! -e "$bk/questions" ] || { echo "asked again:"; cat "$bk/questions"; return 1; }
}

# A signature for a host the agent is forwarded to, with a key whose constraints name no host: ssh
# here is only the way there, so the person is asked, and the question names the host (by its key,
# as nothing names it otherwise). Deny fails the login there; ssh's own login asks nothing.
case_broker_forwarded_host() {
    local fp host1_fp host2_fp question
    fp=$(fingerprint "$k/ecdsa256.pub") host1_fp=$(fingerprint "$keys/host1.pub") host2_fp=$(fingerprint "$keys/host2.pub")
    add "$k/ecdsa256"
    rm -f "$k/ecdsa256"
    remote_command="$remote_ssh -p $port2 $user@127.0.0.1 true" refute login 1 -A
    question=$(cat "$bk/questions")
    expect 1 "$(grep -c -- ---- "$bk/questions")" "questions: host1's login is ssh's own, only the hop asks"
    grep -F "/usr/bin/ssh wants to use your SSH key \"ecdsa256@sshsuite\" ($fp) to log in to the host with key $host2_fp from the host with key $host1_fp (your agent is forwarded there)." <<< "$question"
    echo always > "$bk/answer.mode"
    remote_command="$remote_ssh -p $port2 $user@127.0.0.1 true" login 1 -A
}

# A -c key asks before every signature through the broker's question, whoever signs (ssh, on the
# list, too), and "always" does not stop the next question.
case_broker_confirm_each() {
    local fp
    fp=$(fingerprint "$k/ed25519.pub")
    add -c "$k/ed25519"
    rm -f "$k/ed25519"
    refute login 1
    grep -F "/usr/bin/ssh wants to use your SSH key \"ed25519@sshsuite\" ($fp) to log in to the host with key" "$bk/questions"
    grep -F "This key asks before each use (ssh-add -c)." "$bk/questions"
    echo always > "$bk/answer.mode"
    rm -f "$bk/questions"
    login 1
    rm -f "$bk/questions"
    login 1
    [ -e "$bk/questions" ]
    # pinentry was never asked: the broker's question is the only one.
    [ ! -s "$base/pinentry.log" ]
}

check "the agent's -s/-k command line, as ssh-agent's" case_command_line
check "ssh with an ed25519 key from the agent" case_login ed25519
check "ssh with an ecdsa P-256 key from the agent" case_login ecdsa256
check "ssh with an ecdsa P-384 key from the agent" case_login ecdsa384
check "ssh with an ecdsa P-521 key from the agent" case_login ecdsa521
check "ssh with an RSA key, rsa-sha2-256 and rsa-sha2-512" case_login rsa rsa-sha2-256 rsa-sha2-512
check "ssh-add -l, -L, -d, -D" case_list_and_delete
check "ssh-add -d/-D on one agent leave another's keys; removed keys are added again" case_two_agents_unload
check "ssh-add -x/-X: a locked agent lists and signs nothing" case_lock
check "ssh-add -t: the key leaves after its lifetime" case_lifetime
check "ssh-add -h: a destination constraint and a forbidden hop" case_destination
check "ssh-add -h: a permitted hop through a forwarded agent" case_destination_hop
check "a certificate beside its key" case_certificate
check "ssh -A: the keys listed and used through a forwarded agent" case_forwarding
check "git clone and push over ssh" case_git_over_ssh
check "git commit -S and tag -s with an ssh key, verified" case_commit_signing
check "ssh-keygen -Y sign through the agent, verified" case_file_signing
check "malformed, oversized and hostile messages: failure or close, alive, bounded" case_fuzz
check "another user's connection is refused" case_other_user
if [ -z "$ours" ]; then
    check "ssh-add -c: confirmation through SSH_ASKPASS (ssh-agent's way)" case_confirm_askpass
    for what in "keys survive an agent restart" "keys survive a logout and login (pamtester)" \
            "a locked keychain refuses signatures, still lists" "ssh-add -c asks pinentry, naming program, key and host; Deny fails" \
            "ssh-add -c: a key comment's control characters are shown escaped" \
            "the key is a keychain item (find-key, dump-keychain)" "security import-ssh-keys and export-ssh-key" \
            "a key made inside the TPM signs, never leaves, -d/-D unload it, and fails on another TPM" \
            "ssh-add -d/-D unload: the keychain keeps the keys, a restart lists them" \
            "security delete-ssh-key deletes a key for good, from every agent" \
            "a DSA key is refused with the message the man page gives" \
            "through a broker: ssh and git signing are judged themselves, and asked nothing" \
            "through a broker: another program is asked (program, key, fingerprint); deny fails, always lets it in" \
            "through a broker: a forwarded signature for a host no constraint names is asked, naming the host" \
            "through a broker: a -c key asks before every signature, through the broker's question" \
            "through a broker: without the tests' answerer, pinentry asks the whole question and the password"; do
        skip "$what: needs the keychain's agent, not $AGENT"
    done
else
    check "keys survive an agent restart" case_survives_restart
    check "keys survive a logout and login (pamtester)" case_login_session
    check "an agent left running signs again after the next login" case_login_session keep
    check "a locked keychain refuses signatures, still lists" case_locked_keychain
    check "ssh-add -c asks pinentry, naming program, key and host; Deny fails" case_confirm_names
    check "ssh-add -c: a key comment's control characters are shown escaped" case_confirm_escapes
    check "the key is a keychain item (find-key, dump-keychain)" case_key_item
    check "security import-ssh-keys and export-ssh-key" case_import_export
    check "a key made inside the TPM signs, never leaves, -d/-D unload it, and fails on another TPM" case_tpm_key
    check "ssh-add -d/-D unload: the keychain keeps the keys, a restart lists them" case_unload_keeps_the_keys
    check "security delete-ssh-key deletes a key for good, from every agent" case_delete_ssh_key
    check "a DSA key is refused with the message the man page gives" case_dsa_refused
    if start_broker; then
        brokered=1 check "through a broker: ssh and git signing are judged themselves, and asked nothing" case_broker_trusted_clients
        brokered=1 check "through a broker: another program is asked (program, key, fingerprint); deny fails, always lets it in" \
            case_broker_asks_other_program
        brokered=1 check "through a broker: a forwarded signature for a host no constraint names is asked, naming the host" \
            case_broker_forwarded_host
        brokered=1 check "through a broker: a -c key asks before every signature, through the broker's question" case_broker_confirm_each
        brokered=1 check "through a broker: without the tests' answerer, pinentry asks the whole question and the password" \
            case_broker_asks_through_pinentry
    else
        fail=$((fail + 1)); echo "FAIL the suite's broker did not start"
    fi
fi
summary
