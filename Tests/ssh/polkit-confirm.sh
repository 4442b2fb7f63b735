#!/usr/bin/env bash
# `ssh-add -c` with the keychain's agent: each signature asks polkit, answered by the presence
# suite's authentication agent (Tests/presence/agent.py), first dismissing (the login must fail),
# then with the user's password (it must work). Run by Tests/ssh/run.sh as root, in a mount
# namespace of its own with a private system bus and Debian's polkitd, as Tests/presence does;
# the machine's own bus and polkit are not touched.
# Usage: polkit-confirm.sh WORK USER PASSWORD KEY SSH_COMMAND (WORK holds the agent, security,
# agent.py and actions/; KEY the private key file, readable by USER; SSH_COMMAND a login through
# the agent, as one string).
set -euo pipefail
work=$1 user=$2 password=$3 key=$4 ssh_command=$5

. "$(dirname "$0")/../lib.sh"
private_polkit "$work"
agent_pid=
stop() {
    [ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null
    kill "$(cat "$work/polkitd.pid")" "$(cat "$work/dbus.pid")" 2>/dev/null
}
trap stop EXIT

as_user() {
    setpriv --reuid="$user" --regid="$user" --init-groups env -i HOME="$work/home" USER="$user" PATH="$work:/usr/bin:/bin" \
        SSH_AUTH_SOCK="$work/agent.sock" "$@"
}
printf '%s\n' "$password" | as_user "$work/security" create-keychain "$work/home/.local/share/keychains/login.keychain-db" >/dev/null
as_user "$work/keychain-ssh-agent" -D -a "$work/agent.sock" > "$work/agent.log" 2>&1 &
for _ in $(seq 100); do [ -S "$work/agent.sock" ] && break; sleep 0.05; done
# The agent itself (polkit's subject), not the subshell that runs as_user in the background.
agent_pid=$(pgrep -n -u "$user" -f "keychain-ssh-agent -D -a $work/agent.sock")
as_user timeout 20 ssh-add -c "$key"

# polkit-answer MODE: the tests' authentication agent, registered for the agent's process, in
# MODE (cancel, password:PW) while one login runs; prints how many requests it got.
login_answered_by() {
    local count=$work/requests status=0
    : > "$count"
    chmod 666 "$count"
    as_user /usr/bin/python3 "$work/agent.py" "$agent_pid" "$1" "$count" > "$work/polkit-agent.out" 2>&1 &
    local answerer=$!
    for _ in $(seq 100); do grep -q registered "$work/polkit-agent.out" && break; sleep 0.05; done
    as_user sh -c "$ssh_command" < /dev/null || status=$?
    # The answerer itself is the child of the subshell that runs as_user in the background.
    pkill -P "$answerer" 2>/dev/null || true
    kill "$answerer" 2>/dev/null
    wait "$answerer" 2>/dev/null || true
    echo "$(wc -l < "$count") requests, login status $status"
    [ "$(wc -l < "$count")" -ge 1 ] || { echo "polkit was never asked; the agent's log:"; cat "$work/agent.log"; return 1; }
    return "$status"
}
if login_answered_by cancel; then echo "a dismissed confirmation let the login through"; exit 1; fi
login_answered_by "password:$password" || { echo "the agent's log:"; cat "$work/agent.log"; echo "polkit agent:"; cat "$work/polkit-agent.out"; exit 1; }
