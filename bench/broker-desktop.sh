#!/usr/bin/env bash
# make bench's figures of the broker's deputies (called by bench/run.sh; runs alone too, as root):
# keychain-ssh-agent and keychain-secret-service, the same release build with their keychain's
# class keys in keychain-broker's keeping and in the kernel keyring (today's code), side by side.
# Issue 55's bar: at most +0.2 ms a request for each.
#   - an SSH signature by ssh-keygen (`ssh-keygen -Y sign`, as git signs a commit: /usr/bin's, on a
#     new key's list) through two agents, one a keychain each, timing.py's cases in turn;
#   - the Secret Service's own lookup (SearchItems + GetSecrets on an open session, ss_client.c)
#     by the program that stored the item, through two providers, one a bus and a keychain each,
#     alternated runs of 200 lookups.
# The broker runs as in bench/broker.sh (Tests/broker-lib.sh), here with the agent's and the
# provider's copies as its deputies (--deputy: they relay the process they serve). Every process
# measured is a throwaway user's, started from copies in a root-owned folder under /run, so the
# broker can identify them. No read may ask: the item was made by the program that reads it (the
# key for ssh-keygen by the agent's list; the Secret Service's item by ss_client's copy, which
# the provider names as the maker once it relays its clients, and by itself until then). The
# answerer denies and writes down any question; one fails the figures.
# Writes WORK/broker-ssh.json (timing.py's medians), WORK/broker-ss-broker.txt and
# WORK/broker-ss-kernel.txt (ss_client's medians, microseconds, one a run); without root,
# WORK/broker-desktop-skipped.txt instead.
#
#   bench/broker-desktop.sh BIN WORK   BIN: keychain-broker, keychain-ssh-agent,
#                                      keychain-secret-service and security (release);
#                                      BENCH_STORE_ITEMS (10000: the provider's items),
#                                      BENCH_ROUNDS (40: 2.5 times as many signatures per agent),
#                                      BENCH_BROKER_RUNS (3: ss_client runs per custody)
set -euo pipefail
bin=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
items=${BENCH_STORE_ITEMS:-10000}
# Signatures: 2.5 times the rounds (100 by default). A signature is a whole process of 4 to 8 ms
# and the bar a tenth of a millisecond: at 40 the difference moved by 3 ms between runs.
rounds=$((${BENCH_ROUNDS:-40} * 5 / 2))
runs=${BENCH_BROKER_RUNS:-3}
target=$((items / 2))

if [ "$(id -u)" != 0 ]; then
    echo "deputy figures: skipped (they need root, to make the broker's system user and a user whose keychain it keeps)" > "$work/broker-desktop-skipped.txt"
    exit 0
fi
for tool in setpriv keyctl useradd setsid python3 gcc pkg-config dbus-daemon dbus-send ssh-keygen ssh-add; do
    command -v "$tool" >/dev/null || { echo "bench/broker-desktop.sh: $tool is missing" >&2; exit 1; }
done

# shellcheck source=Tests/broker-lib.sh
. "$here/../Tests/broker-lib.sh"
user=kcbdu$$
daemons=()
cleanup() {
    # Every step, whatever the one before returned (the broker's wait returns 143, its SIGTERM).
    set +e
    for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null; done
    broker_stop
    client_teardown "$user"
    broker_teardown
}
trap cleanup EXIT

broker_setup "kcbd$$" kc-bench-deputy
dir=$broker_dir socket=$broker_socket home=$broker_dir/home
client_setup "$user" "$home"
mkdir -p "$home" "$dir/no-services"
broker_copy "$bin" keychain-broker keychain-ssh-agent keychain-secret-service security
cp "$here/timing.py" "$dir/bin/"
# shellcheck disable=SC2046 # pkg-config's flags are words on purpose
gcc -O2 -Wall -o "$dir/bin/ss_client" "$here/ss_client.c" $(pkg-config --cflags --libs libsystemd)
sed "s|@SERVICES@|$dir/no-services|" "$here/../Tests/secret-service/session.conf" > "$dir/session.conf"
# The answerer of every question (KEYCHAIN_ACCESS_ANSWERER): writes it down and denies.
printf '#!/bin/sh\ncat >> %s/questions\nprintf "deny\\n"\n' "$home" > "$dir/bin/answer-deny"
chmod 755 "$dir/bin"/*
chmod 644 "$dir/session.conf"
chown "$user:" "$home"
chmod 700 "$home"

# The copies are the keychain's own programs (--own-program, as the installed ones are by default:
# an item the Secret Service keeps without a list is the provider's) and the two its deputies.
own=()
for program in security keychain-ssh-agent keychain-secret-service; do own+=(--own-program "$dir/bin/$program"); done
broker_start "${own[@]}" --deputy "$dir/bin/keychain-ssh-agent" --deputy "$dir/bin/keychain-secret-service" ||
    { echo "bench/broker-desktop.sh: the broker did not start"; exit 1; }

# as_user [VAR=VALUE]... COMMAND...: as the user, in a keyring session of its own, without a
# terminal (so the answerer is the only one who could be asked). Its class keys in the kernel
# keyring are in its persistent keyring, which every such session shares.
as_user() {
    setsid -w setpriv --reuid="$user" --regid="$user" --init-groups keyctl session - \
        env -i PATH=/usr/bin:/bin HOME="$home" KEYCHAIN_ACCESS_ANSWERER="$dir/bin/answer-deny" "$@" </dev/null
}
# daemon NAME [VAR=VALUE]... COMMAND...: the same, in the background, its output in $dir/NAME.log;
# its pid (setsid, setpriv, keyctl and env each exec the next) in daemons.
daemon() {
    local name=$1; shift
    setsid setpriv --reuid="$user" --regid="$user" --init-groups keyctl session - \
        env -i PATH=/usr/bin:/bin HOME="$home" KEYCHAIN_ACCESS_ANSWERER="$dir/bin/answer-deny" "$@" \
        </dev/null >>"$dir/$name.log" 2>&1 &
    daemons+=("$!")
}
no_questions() {
    if [ -e "$home/questions" ]; then
        echo "bench/broker-desktop.sh: the broker asked about a read by its trusted program ($1):"
        cat "$home/questions"
        exit 1
    fi
}
# waited NAME TEST...: TEST (a command) until it holds, 20 s at most, else NAME's log and the end.
waited() {
    local name=$1; shift
    for _ in $(seq 400); do "$@" && return 0; sleep 0.05; done
    echo "bench/broker-desktop.sh: $name did not start:"; cat "$dir/$name.log"
    exit 1
}

# answers BUS: whether a provider answers on that bus (as the user: the bus is the user's).
answers() {
    as_user DBUS_SESSION_BUS_ADDRESS="$1" dbus-send --session --print-reply=literal --dest=org.freedesktop.secrets \
        /org/freedesktop/secrets org.freedesktop.DBus.Peer.Ping >/dev/null 2>&1
}

# Two keychains: one made in the broker (its class keys there only), one in the kernel keyring.
as_user KEYCHAIN_BROKER_SOCKET="$socket" sh -c 'printf "bench password\n" | "$0" create-keychain --no-tpm "$1"' \
    "$dir/bin/security" "$home/broker.keychain-db" >/dev/null
as_user sh -c 'printf "bench password\n" | "$0" create-keychain --no-tpm "$1"' "$dir/bin/security" "$home/kernel.keychain-db" >/dev/null
# Today's code keeps them in the user's persistent keyring; on a machine that runs keychain-broker
# they would be its, and the figures would compare the broker with itself.
as_user sh -c 'keyctl show "$(keyctl get_persistent @s)"' 2>/dev/null | grep -q "keychain" ||
    { echo "bench/broker-desktop.sh: the kernel keyring holds no class key of $home/kernel.keychain-db (a broker runs here?)"; exit 1; }

# --- SSH: a signature by ssh-keygen through the agent ------------------------------------------
# One Ed25519 key added to each agent, then its private file removed: ssh-keygen must ask the
# agent (it signs with the file where it can read one). Through the broker the agent relays
# ssh-keygen, which the key's list names, to the broker on every signature.
as_user ssh-keygen -q -t ed25519 -N '' -C bench-deputy -f "$home/sign"
for custody in broker kernel; do
    broker_env=()
    [ "$custody" = kernel ] || broker_env=(KEYCHAIN_BROKER_SOCKET="$socket")
    daemon "agent-$custody" "${broker_env[@]}" KEYCHAIN_PATH="$home/$custody.keychain-db" \
        "$dir/bin/keychain-ssh-agent" -D -a "$home/agent-$custody.sock"
    waited "agent-$custody" test -S "$home/agent-$custody.sock"
    as_user SSH_AUTH_SOCK="$home/agent-$custody.sock" ssh-add -q "$home/sign"
done
rm -f "$home/sign"
python3 - "$dir/ssh.json" <<PY
import json, sys
home, rounds = "$home", $rounds
sign = ["/usr/bin/ssh-keygen", "-Y", "sign", "-f", home + "/sign.pub", "-n", "file"]
cases = {f"sign/{custody}": {"argv": sign, "stdin": "signed by the agent's key\n", "expect": "-----BEGIN SSH SIGNATURE-----",
                             "env": {"SSH_AUTH_SOCK": f"{home}/agent-{custody}.sock"}} for custody in ("broker", "kernel")}
json.dump({"rounds": rounds, "warmup": 5, "cases": cases}, open(sys.argv[1], "w"))
PY
chmod 644 "$dir/ssh.json"
as_user python3 "$dir/bin/timing.py" "$dir/ssh.json" > "$work/broker-ssh.json" ||
    { no_questions "ssh-keygen -Y sign"; echo "bench/broker-desktop.sh: a signature failed"; cat "$dir"/agent-*.log; exit 1; }
no_questions "ssh-keygen -Y sign"
# The broker judged ssh-keygen itself, through the agent (its access log, a ring of the user's
# last 256 reads: read before the lookups below fill it).
access_log() { as_user KEYCHAIN_BROKER_SOCKET="$socket" "$dir/bin/security" access-log > "$dir/access.log"; }
access_log
grep -q "trusted: ssh-keygen (/usr/bin/ssh-keygen) .*, through keychain-ssh-agent ($dir/bin/keychain-ssh-agent)" "$dir/access.log" ||
    { echo "bench/broker-desktop.sh: the broker logged no signature by ssh-keygen through the agent:"; cat "$dir/access.log"; exit 1; }

# --- the Secret Service: its own lookup by the program that stored the item --------------------
# A session bus and a provider for each custody, the user's; $items items stored by ss_client's
# copy (CreateItem, pipelined), one of them looked up: SearchItems finds it among them.
for custody in broker kernel; do
    as_user dbus-daemon --config-file="$dir/session.conf" --fork --print-address=3 --print-pid=4 \
        3> "$dir/bus-$custody" 4> "$dir/bus-$custody.pid"
    bus=$(head -1 "$dir/bus-$custody")
    daemons+=("$(head -1 "$dir/bus-$custody.pid")")
    broker_env=()
    [ "$custody" = kernel ] || broker_env=(KEYCHAIN_BROKER_SOCKET="$socket")
    daemon "provider-$custody" "${broker_env[@]}" DBUS_SESSION_BUS_ADDRESS="$bus" KEYCHAIN_PATH="$home/$custody.keychain-db" \
        "$dir/bin/keychain-secret-service"
    waited "provider-$custody" answers "$bus"
    as_user DBUS_SESSION_BUS_ADDRESS="$bus" "$dir/bin/ss_client" store-pipelined "$items" stored application keychain-bench-deputy >/dev/null
done
for _ in $(seq "$runs"); do
    for custody in broker kernel; do
        as_user DBUS_SESSION_BUS_ADDRESS="$(head -1 "$dir/bus-$custody")" "$dir/bin/ss_client" lookup 200 \
            stored application keychain-bench-deputy bench-item "$target" \
            >> "$work/broker-ss-$custody.txt" ||
            { no_questions "ss_client lookup"; echo "bench/broker-desktop.sh: a lookup failed"; cat "$dir/provider-$custody.log"; exit 1; }
    done
    no_questions "ss_client lookup"
done


# Who the broker judged on the lookups: ss_client through the provider where the provider relays
# its clients, else the provider itself.
access_log
reader=$(grep -o "trusted: [^ ]* ($dir/bin/[^)]*)" "$dir/access.log" | tail -1)
case $reader in
*"/bin/ss_client)" | *"/bin/keychain-secret-service)") echo "deputy figures: the broker judged ${reader#trusted: } on the Secret Service's lookups" >&2 ;;
*) echo "bench/broker-desktop.sh: the broker logged no lookup through the Secret Service:"; cat "$dir/access.log"; exit 1 ;;
esac
