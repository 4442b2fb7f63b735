#!/usr/bin/env bash
# make bench's SSH agent figures (called by bench/run.sh; runs alone too): one signature through
# keychain-ssh-agent against OpenSSH's ssh-agent holding the same Ed25519 key (a whole
# `ssh-add -T KEY.pub`: connect, list, sign, verify), against gnome-keyring's SSH agent where
# installed; five rounds of adding a key and `ssh-add -D` against ssh-agent; and each agent's
# private memory holding the same 20 keys. Every agent runs here on a socket of its own and is
# stopped at the end. Writes WORK/ssh-sign.json and WORK/ssh-unload.json (timing.py's medians)
# and appends the memory figures to WORK/results.jsonl.
#
#   bench/ssh.sh BIN WORK      BIN: keychain-ssh-agent and security; BENCH_SSH_ROUNDS (default 40);
#                              OURS (default BIN/keychain-ssh-agent): the agent measured as ours
set -euo pipefail
bin=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rounds=${BENCH_SSH_ROUNDS:-40}
ours=${OURS:-$bin/keychain-ssh-agent}
for tool in ssh-agent ssh-add ssh-keygen; do
    command -v "$tool" >/dev/null || { echo "bench/ssh.sh: $tool is missing (apt-get install openssh-client)" >&2; exit 1; }
done

state=$(mktemp -d "$work/ssh-XXXXXX")
chmod 700 "$state"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    "$bin/security" delete-keychain "$state/ssh.keychain-db" >/dev/null 2>&1 || true
    rm -rf "$state"
}
trap cleanup EXIT

# A keychain of its own for ours, unlocked: its keys are keychain items, as a user's are.
export KEYCHAIN_PATH=$state/ssh.keychain-db
printf 'bench password\n' | "$bin/security" create-keychain "$KEYCHAIN_PATH" >/dev/null

# start_agent NAME ARGV...: an agent in the foreground on $state/NAME.sock; its pid in pids.
start_agent() {
    local name=$1; shift
    "$@" -D -a "$state/$name.sock" >"$state/$name.log" 2>&1 &
    pids+=("$!")
    eval "${name}_pid=$!"
    for _ in $(seq 100); do [ -S "$state/$name.sock" ] && return; sleep 0.05; done
    echo "bench/ssh.sh: $name did not make its socket:"; cat "$state/$name.log"; exit 1
}
start_agent openssh ssh-agent
start_agent ours "$ours"
# shellcheck disable=SC2154 # set by start_agent's eval
agents=(openssh:"$openssh_pid" ours:"$ours_pid")
# gnome-keyring's SSH agent (Debian 12: gnome-keyring-daemon --components=ssh, in front of an
# ssh-agent of its own), on a session bus of this script's (bench/run.sh's when called from it).
if command -v gnome-keyring-daemon >/dev/null && [ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ]; then
    mkdir -m 700 "$state/gnome-run"
    gnome_env=$(XDG_RUNTIME_DIR=$state/gnome-run gnome-keyring-daemon --start --components=ssh 2>/dev/null || true)
    gnome_sock=$(sed -n 's/^SSH_AUTH_SOCK=//p' <<< "$gnome_env")
    gnome_pid=$(pgrep -n -f 'gnome-keyring-daemon --start --components=ssh' || true)
    [ -n "$gnome_pid" ] && pids+=("$gnome_pid")
    if [ -n "$gnome_sock" ] && [ -S "$gnome_sock" ]; then
        ln -s "$gnome_sock" "$state/gnome.sock"
        agents+=(gnome:"$gnome_pid")
    fi
fi

ssh-keygen -q -t ed25519 -N '' -C bench-signing -f "$state/sign"
for agent in "${agents[@]}"; do
    SSH_AUTH_SOCK=$state/${agent%%:*}.sock ssh-add -q "$state/sign" 2>/dev/null
done

python3 - "$state/spec.json" "$state" "$rounds" "${agents[@]}" <<'PY'
import json, sys
spec, state, rounds, agents = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
cases = {f"sign/{a.split(':')[0]}": {"argv": ["ssh-add", "-T", f"{state}/sign.pub"],
                                     "env": {"SSH_AUTH_SOCK": f"{state}/{a.split(':')[0]}.sock"}} for a in agents}
json.dump({"rounds": rounds, "warmup": 5, "cases": cases}, open(spec, "w"))
PY
python3 "$here/timing.py" "$state/spec.json" > "$work/ssh-sign.json"

# Five rounds of `ssh-add KEY` then `ssh-add -D`, as someone clearing the agent before trying
# another key: -D unloads the keys from this agent only, so a round writes the keychain at most
# once (the add) and not again for -D. Run after the signatures: -D unloads their key too.
ssh-keygen -q -t ed25519 -N '' -C bench-unload -f "$state/unload"
python3 - "$state/spec-unload.json" "$state" "$rounds" <<'PY'
import json, sys
spec, state, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
script = 'for i in 1 2 3 4 5; do ssh-add -q "$0" && ssh-add -D; done'
cases = {f"unload/{a}": {"argv": ["sh", "-c", script, f"{state}/unload"], "env": {"SSH_AUTH_SOCK": f"{state}/{a}.sock"}}
         for a in ("ours", "openssh")}
json.dump({"rounds": rounds, "warmup": 3, "cases": cases}, open(spec, "w"))
PY
python3 "$here/timing.py" "$state/spec-unload.json" > "$work/ssh-unload.json"

# Memory: the same 20 keys in each (10 Ed25519, 5 ECDSA P-256, 5 RSA 3072), then one signature
# with each so that every key has been used once. Anonymous memory is what the agent costs the
# machine alone (its heap, arenas, stacks). Not Private_Dirty: a binary just linked has its
# text pages dirty in the page cache until written back, and they count as private dirty.
for i in $(seq 1 20); do
    case $i in
    1[1-5]) type=(-t ecdsa -b 256) ;;
    1[6-9] | 20) type=(-t rsa -b 3072) ;;
    *) type=(-t ed25519) ;;
    esac
    ssh-keygen -q "${type[@]}" -N '' -C "bench-$i" -f "$state/key$i"
done
for agent in openssh:"$openssh_pid" ours:"$ours_pid"; do
    sock=$state/${agent%%:*}.sock
    for i in $(seq 1 20); do SSH_AUTH_SOCK=$sock ssh-add -q "$state/key$i" 2>/dev/null; done
    for i in $(seq 1 20); do SSH_AUTH_SOCK=$sock ssh-add -T "$state/key$i.pub"; done
    listed=$(SSH_AUTH_SOCK=$sock ssh-add -l | wc -l)
    [ "$listed" -ge 20 ] || { echo "bench/ssh.sh: ${agent%%:*} holds $listed keys, not 20"; exit 1; }
    for field in Anonymous Pss Rss; do
        printf '{"figure": "ssh-%s/%s", "ours": %s}\n' "$field" "${agent%%:*}" \
            "$(awk -v f="$field:" '$1 == f {print $2}' "/proc/${agent#*:}/smaps_rollup")" >> "$work/results.jsonl"
    done
done
