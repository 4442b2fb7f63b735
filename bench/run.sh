#!/usr/bin/env bash
# make bench: our helpers and engine against what people use today, side by side in one run.
# Peers come from Debian: git credential-store, git-credential-libsecret (built from the source
# Debian ships) with gnome-keyring-daemon in a private D-Bus session, docker-credential-pass
# (throwaway GnuPG key, no passphrase) and docker-credential-secretservice. Prints one table of
# medians and ratios, and writes it into bench/README.md (the prose around it is kept); every run
# must succeed and print the expected secret to count.
#
# Environment: BENCH_ROUNDS (default 40, after 5 warm-ups), BENCH_STORE_ITEMS (10000),
# BENCH_GNOME_ITEMS (1000: gnome-keyring rewrites its file on every store, so filling it
# takes ~25 ms per item), BENCH_BIG (100000), BENCH_TPM_ROUNDS (15: each unlock runs scrypt),
# BENCH_SSH_ROUNDS (40: bench/ssh.sh), BENCH_BROKER_RUNS (3: keychain-bench runs per custody in
# bench/broker.sh and the Secret Service lookups of bench/broker-desktop.sh, which need root and
# skip their figures without), BENCH_UNLOCK (1; 0 skips the
# PAM unlock figure, which makes a user and an /etc/pam.d service: for a machine others are
# testing PAM on), BENCH_SYNC_ITEMS (BENCH_STORE_ITEMS: the synchronizable items of the sync
# figures, bench/sync.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=$root/.build/release

# gnome-keyring and the libsecret clients need a session bus of their own.
if [ -z "${KEYCHAIN_BENCH_BUS:-}" ]; then
    exec env KEYCHAIN_BENCH_BUS=1 dbus-run-session -- bash "$0" "$@" 2> >(grep -v '^dbus-daemon\[' >&2)
fi

rounds=${BENCH_ROUNDS:-40}
store_items=${BENCH_STORE_ITEMS:-10000}
gnome_items=${BENCH_GNOME_ITEMS:-1000}
big=${BENCH_BIG:-100000}
target=$((store_items / 2))        # the item every lookup asks for
gnome_target=$((gnome_items / 2))

work=$(mktemp -d /tmp/keychain-bench-XXXXXX)
chmod 755 "$work"
export HOME=$work/home GNUPGHOME=$work/gnupg PASSWORD_STORE_DIR=$work/pass
export XDG_DATA_HOME=$HOME/.local/share XDG_CONFIG_HOME=$HOME/.config XDG_RUNTIME_DIR=$work/run
export GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 KEYCHAIN_PATH=$work/bench.keychain-db
mkdir -p "$HOME" "$GNUPGHOME" "$XDG_RUNTIME_DIR"
chmod 700 "$GNUPGHOME" "$XDG_RUNTIME_DIR"
pam_user='' pam_service='' ours_pid='' ours_bus_pid='' empty_bus_pid='' big_pid='' big_bus_pid=''
cleanup() {
    [ -n "$ours_pid" ] && kill "$ours_pid" 2>/dev/null
    [ -n "$ours_bus_pid" ] && kill "$ours_bus_pid" 2>/dev/null
    [ -n "$empty_bus_pid" ] && kill "$empty_bus_pid" 2>/dev/null
    [ -n "$big_pid" ] && kill "$big_pid" 2>/dev/null
    [ -n "$big_bus_pid" ] && kill "$big_bus_pid" 2>/dev/null
    "$bin/security" delete-keychain "$work/secret-service.keychain-db" >/dev/null 2>&1 || true
    for keychain in "$work"/bulk-*.keychain-db; do [ -e "$keychain" ] && "$bin/security" delete-keychain "$keychain" >/dev/null 2>&1; done
    "$bin/security" delete-keychain "$KEYCHAIN_PATH" >/dev/null 2>&1 || true
    gpgconf --kill gpg-agent 2>/dev/null || true
    if [ -n "$pam_user" ]; then
        runuser -u "$pam_user" -- keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1 || true
        userdel -r "$pam_user" >/dev/null 2>&1 || true
        rm -f "/etc/pam.d/$pam_service"
    fi
    rm -rf "$work"
}
trap cleanup EXIT

say() { printf '%s\n' "$*" >&2; }
cat /proc/loadavg > "$work/load.txt"   # the load beside the figures (report.py)
results=$work/results.jsonl
record() { printf '%s\n' "$1" >> "$results"; }   # one JSON object per figure
# secrets_owned ADDRESS: whether a provider owns org.freedesktop.secrets on that session bus.
secrets_owned() {
    DBUS_SESSION_BUS_ADDRESS=$1 dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q true
}

# --- peers and tools ------------------------------------------------------------------------
say "building the peers and our release binaries"
gcc -O2 -o "$work/peakrss" "$here/peakrss.c"
gcc -O2 -Wall -o "$work/pam_timer" "$here/pam_timer.c" -lpam
libsecret_src=/usr/share/doc/git/contrib/credential/libsecret
make -s -C "$work" -f "$libsecret_src/Makefile" VPATH="$libsecret_src" >/dev/null
libsecret=$work/git-credential-libsecret

# --- the stores, each holding the same kind of credentials ----------------------------------
say "filling: keychain $store_items items, credential-store $store_items lines, gnome-keyring $gnome_items items"
printf 'bench password\n' | "$bin/keychain-bench" fill "$KEYCHAIN_PATH" "$store_items"
# A backup of exactly these items, for the bulk-write figures (before docker's login joins them).
printf 'backup password\n' | "$bin/security" export -k "$KEYCHAIN_PATH" -o "$work/backup.kcb" >/dev/null 2>&1
for ((i = 0; i < store_items; i++)); do
    printf 'https://user%d:pass%d@host%d.example.com\n' "$i" "$i" "$i"
done > "$work/credential-store"
chmod 600 "$work/credential-store"

# Started (and its login keyring made) before any client asks, so D-Bus activation starts no
# second one; it exits with the session bus.
printf 'gnome' | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1
# It may return before it owns the name: a client asking then would have the bus start a second
# daemon, with the bus's environment (the real HOME) and no login keyring.
for _ in $(seq 100); do
    secrets_owned "$DBUS_SESSION_BUS_ADDRESS" && break
    sleep 0.1
done
for ((i = 0; i < gnome_items; i++)); do
    printf 'protocol=https\nhost=host%d.example.com\nusername=user%d\npassword=pass%d\n\n' "$i" "$i" "$i" | "$libsecret" store >/dev/null
done

# Moving in: gnome-keyring's file of those items, read and imported by `security import-secrets`
# into a keychain of its own (keyring NAME.keyring becomes keychain NAME, with the keyring's password).
say "importing: gnome-keyring's $gnome_items items with security import-secrets"
cp "$XDG_DATA_HOME/keyrings/login.keyring" "$work/moving-in.keyring"
start=$(date +%s%N)
printf 'gnome\n' | "$bin/security" import-secrets --keyring "$work/moving-in.keyring" > "$work/import.log" 2>&1
record "{\"figure\": \"import-gnome/ms\", \"ours\": $((($(date +%s%N) - start) / 1000000))}"
grep -q "import-secrets: $gnome_items added" "$work/import.log" || { echo "import-secrets did not add $gnome_items items:"; cat "$work/import.log"; exit 1; }

gpg --batch --quiet --passphrase '' --quick-gen-key bench@keychain.invalid default default never 2>/dev/null
pass init bench@keychain.invalid >/dev/null
docker_json='{"ServerURL":"https://registry.example.com","Username":"robot","Secret":"docker-pass"}'
for helper in docker-credential-keychain docker-credential-pass docker-credential-secretservice; do
    path=$helper; [ "$helper" = docker-credential-keychain ] && path=$bin/$helper
    printf '%s' "$docker_json" | "$path" store
done

# keychain-secret-service on a session bus of its own (gnome-keyring owns the name on this one),
# over a keychain of its own, filled the way gnome-keyring was.
say "filling: keychain-secret-service $gnome_items items through git-credential-libsecret"
mkdir "$work/no-services"
sed "s|@SERVICES@|$work/no-services|" "$root/Tests/secret-service/session.conf" > "$work/ours.conf"
dbus-daemon --config-file="$work/ours.conf" --fork --print-address=3 --print-pid=4 3> "$work/ours.address" 4> "$work/ours.pid"
ours_bus=$(head -1 "$work/ours.address") ours_bus_pid=$(head -1 "$work/ours.pid")
printf 'bench password\n' | "$bin/security" create-keychain "$work/secret-service.keychain-db" >/dev/null
DBUS_SESSION_BUS_ADDRESS=$ours_bus KEYCHAIN_PATH=$work/secret-service.keychain-db "$bin/keychain-secret-service" &
ours_pid=$!
until secrets_owned "$ours_bus"; do sleep 0.1; done
for ((i = 0; i < gnome_items; i++)); do
    printf 'protocol=https\nhost=host%d.example.com\nusername=user%d\npassword=pass%d\n\n' "$i" "$i" "$i" |
        DBUS_SESSION_BUS_ADDRESS=$ours_bus "$libsecret" store >/dev/null
done

# A second provider holding $store_items items: git's credential-store lines imported into a keychain
# of its own (items the Secret Service finds by their network attributes), on a bus of its own, so
# that its lookups can alternate with the others below. gnome-keyring's figure stays the one at
# $gnome_items items: filling it with $store_items would take hours (it rewrites its file on every
# store), and it only gets slower as it grows.
printf 'bench password\n' | "$bin/security" create-keychain "$work/provider-big.keychain-db" >/dev/null
KEYCHAIN_PATH=$work/provider-big.keychain-db "$bin/security" import-secrets --git-credentials "$work/credential-store" >/dev/null
dbus-daemon --config-file="$work/ours.conf" --fork --print-address=3 --print-pid=4 3> "$work/big.address" 4> "$work/big.pid"
big_bus=$(head -1 "$work/big.address") big_bus_pid=$(head -1 "$work/big.pid")
DBUS_SESSION_BUS_ADDRESS=$big_bus KEYCHAIN_PATH=$work/provider-big.keychain-db "$bin/keychain-secret-service" &
big_pid=$!
until secrets_owned "$big_bus"; do sleep 0.1; done
# The import's pages reach the disk now, not under the lookups measured later.
sync

# A session bus with no Secret Service at all: secret-tool starts, connects, asks and is told
# there is no provider. What it costs is the floor under any provider's figure.
dbus-daemon --config-file="$work/ours.conf" --fork --print-address=3 --print-pid=4 3> "$work/empty.address" 4> "$work/empty.pid"
empty_bus=$(head -1 "$work/empty.address") empty_bus_pid=$(head -1 "$work/empty.pid")

# --- process figures: the helpers as git and docker start them ------------------------------
git_get=$(printf 'protocol=https\nhost=host%d.example.com\n\n' "$target")
git_get_gnome=$(printf 'protocol=https\nhost=host%d.example.com\n\n' "$gnome_target")
spec=$work/spec.json
python3 - "$spec" <<PY
import json, sys
bin, work, rounds = "$bin", "$work", $rounds
git_get, git_gnome = """$git_get\n\n""", """$git_get_gnome\n\n"""
fill = lambda helper: ["git", "-c", "credential.helper=", "-c", "credential.helper=" + helper, "credential", "fill"]
cases = {
    "helper/keychain": {"argv": [bin + "/git-credential-keychain", "get"], "stdin": git_get, "expect": "password=pass$target"},
    "helper/store": {"argv": ["git", "credential-store", "--file=" + work + "/credential-store", "get"], "stdin": git_get, "expect": "password=pass$target"},
    "helper/libsecret": {"argv": [work + "/git-credential-libsecret", "get"], "stdin": git_gnome, "expect": "password=pass$gnome_target"},
    "fill/keychain": {"argv": fill(bin + "/git-credential-keychain"), "stdin": git_get, "expect": "password=pass$target"},
    "fill/store": {"argv": fill("store --file=" + work + "/credential-store"), "stdin": git_get, "expect": "password=pass$target"},
    "fill/libsecret": {"argv": fill(work + "/git-credential-libsecret"), "stdin": git_gnome, "expect": "password=pass$gnome_target"},
    "docker/keychain": {"argv": [bin + "/docker-credential-keychain", "get"], "stdin": "https://registry.example.com", "expect": "docker-pass"},
    "docker/pass": {"argv": ["docker-credential-pass", "get"], "stdin": "https://registry.example.com", "expect": "docker-pass"},
    "docker/secretservice": {"argv": ["docker-credential-secretservice", "get"], "stdin": "https://registry.example.com", "expect": "docker-pass"},
}
ours = {"DBUS_SESSION_BUS_ADDRESS": "$ours_bus"}
lookup = ["secret-tool", "lookup", "server", "host$gnome_target.example.com", "protocol", "https"]
store = ["secret-tool", "store", "--label=bench", "application", "keychain-bench"]
cases["service-lookup/ours"] = {"argv": lookup, "env": ours, "expect": "pass$gnome_target"}
cases["service-lookup/gnome"] = {"argv": lookup, "expect": "pass$gnome_target"}
cases["service-store/ours"] = {"argv": store, "env": ours, "stdin": "stored"}
cases["service-store/gnome"] = {"argv": store, "stdin": "stored"}
cases["service-lookup/none"] = {"argv": lookup, "env": {"DBUS_SESSION_BUS_ADDRESS": "$empty_bus"}, "status": 1}
json.dump({"rounds": rounds, "warmup": 5, "cases": cases}, open(sys.argv[1], "w"))
PY
say "timing the helpers: $rounds rounds of every case in turn"
python3 "$here/timing.py" "$spec" > "$work/process.json"

# Peak memory: a few runs each through peakrss, the largest kept.
for helper in git-credential-keychain docker-credential-keychain; do
    input=$work/$helper.in
    if [ "$helper" = git-credential-keychain ]; then printf '%s\n\n' "$git_get" > "$input"; else printf 'https://registry.example.com' > "$input"; fi
    peak=0
    for _ in 1 2 3 4 5; do
        kib=$("$work/peakrss" "$input" "$bin/$helper" get)
        [ "$kib" -gt "$peak" ] && peak=$kib
    done
    record "{\"figure\": \"rss/$helper\", \"ours\": $peak}"
done
# The services' resident memory, each holding its $gnome_items items after the lookups and stores.
record "{\"figure\": \"service-rss/ours\", \"ours\": $(awk '/^VmRSS/ {print $2}' "/proc/$ours_pid/status")}"
# gnome-keyring's process is the one that owns the name on this session's bus (the newest
# gnome-keyring-daemon on the machine may be another session's).
gnome_pid=$(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets | awk '/uint32/ {print $2}')
record "{\"figure\": \"service-rss/gnome\", \"ours\": $(awk '/^VmRSS/ {print $2}' "/proc/$gnome_pid/status")}"
# The least a provider on this stack holds: a C program doing only what any must (bench/stack_floor.c).
# shellcheck disable=SC2046 # pkg-config's flags are words on purpose
gcc -O2 -Wall -o "$work/stack_floor" "$here/stack_floor.c" $(pkg-config --cflags --libs libsystemd sqlite3 libsodium libcrypto)
record "{\"figure\": \"service-rss/floor\", \"ours\": $(DBUS_SESSION_BUS_ADDRESS=$ours_bus "$work/stack_floor")}"
# Their private (anonymous) part: what holding the items costs, with no library page counted; and
# their proportional share (PSS: each shared page divided among the processes that map it).
record "{\"figure\": \"service-anon/ours\", \"ours\": $(awk '/^RssAnon/ {print $2}' "/proc/$ours_pid/status")}"
record "{\"figure\": \"service-anon/gnome\", \"ours\": $(awk '/^RssAnon/ {print $2}' "/proc/$gnome_pid/status")}"
record "{\"figure\": \"service-pss/ours\", \"ours\": $(awk '/^Pss:/ {print $2}' "/proc/$ours_pid/smaps_rollup")}"
record "{\"figure\": \"service-pss/gnome\", \"ours\": $(awk '/^Pss:/ {print $2}' "/proc/$gnome_pid/smaps_rollup")}"
for peer in "git credential-store --file=$work/credential-store get" "$libsecret get"; do
    printf '%s\n\n' "$git_get" > "$work/peer.in"
    record "{\"figure\": \"rss/$(basename "${peer%% *}")\", \"ours\": $("$work/peakrss" "$work/peer.in" $peer)}"
done

# --- the providers' own work per request ----------------------------------------------------
# One connection and one plain session each, as a browser or an IDE holds them: neither
# secret-tool's start nor its libraries are counted, only the calls and the provider answering
# them. Alternated, so a slow moment of the machine falls on both. After the memory figures: the
# stores replace one item, but gnome-keyring rewrites its file each time.
say "the providers' own lookup and store, on one open connection each"
# shellcheck disable=SC2046 # pkg-config's flags are words on purpose
gcc -O2 -Wall -o "$work/ss_client" "$here/ss_client.c" $(pkg-config --cflags --libs libsystemd)
provider_lookup=("pass$gnome_target" server "host$gnome_target.example.com" protocol https)
provider_store=(stored application keychain-bench-provider)
# Lookups alternate with lookups only, stores with stores: a lookup run right after
# gnome-keyring's stores (each rewrites its file) would share the machine with their writeback.
# Beside them, the floor under both: two Peer.Ping round trips to the same provider through the
# same bus daemon (the provider's D-Bus library answers them without the provider's code).
big_lookup=("pass$target" server "host$target.example.com" protocol https)
for _ in 1 2 3 4 5; do
    DBUS_SESSION_BUS_ADDRESS=$ours_bus "$work/ss_client" lookup 200 "${provider_lookup[@]}" >> "$work/provider-lookup-ours.txt"
    "$work/ss_client" lookup 200 "${provider_lookup[@]}" >> "$work/provider-lookup-gnome.txt"
    DBUS_SESSION_BUS_ADDRESS=$big_bus "$work/ss_client" lookup 200 "${big_lookup[@]}" >> "$work/provider-lookup-big.txt"
    DBUS_SESSION_BUS_ADDRESS=$ours_bus "$work/ss_client" ping 200 >> "$work/provider-ping-ours.txt"
    "$work/ss_client" ping 200 >> "$work/provider-ping-gnome.txt"
done
for _ in 1 2 3 4 5; do
    DBUS_SESSION_BUS_ADDRESS=$ours_bus "$work/ss_client" store 20 "${provider_store[@]}" >> "$work/provider-store-ours.txt"
    "$work/ss_client" store 20 "${provider_store[@]}" >> "$work/provider-store-gnome.txt"
done

# A client storing many secrets in a row (CreateItem each, one connection), waiting for each
# answer (a commit of its own in the provider), then one sending them all before reading the
# answers (the calls waiting together share a commit). gnome-keyring is not asked: at 25-44 ms a
# store, 1,000 take a minute.
say "the provider storing $gnome_items items in a row, then pipelined, 3 times each"
for round in 1 2 3; do
    DBUS_SESSION_BUS_ADDRESS=$ours_bus "$work/ss_client" store-many "$gnome_items" stored application "keychain-bench-many-$round" >> "$work/provider-many-ours.txt"
    DBUS_SESSION_BUS_ADDRESS=$ours_bus "$work/ss_client" store-pipelined "$gnome_items" stored application "keychain-bench-pipelined-$round" >> "$work/provider-pipelined-ours.txt"
done

# --- bulk writes: imports of $store_items items, each into a fresh keychain -------------------
# The commands as a user runs them, whole processes (the backup's scrypt included); only the
# import is timed, not making the keychain it goes into.
say "bulk writes: security import of a $store_items-item backup, import-secrets of $store_items git credentials and of keyring files of $store_items (and of $store_items look-alikes), 3 times each"
elapsed_ms() { python3 -c 'import sys, time; print((time.time_ns() - int(sys.argv[1])) / 1e6)' "$1"; }
# A keyring of libsecret's generic schema (secret-tool, python-keyring), written in
# gnome-keyring's format: the daemon would take hours to fill (it rewrites its file on every
# store). import-secrets makes its keychain (keyring NAME becomes keychain NAME), so that scrypt
# is in its time, as the backup's is in the restore's.
/usr/bin/python3 "$root/Tests/stress/keyring_file.py" "$work/bulk-keyring.keyring" "$store_items" 'keyring password'
# Look-alikes: one label and attribute set, a secret each, which gnome-keyring keeps as items of
# their own; each item's "already there?" once read every earlier one.
/usr/bin/python3 "$root/Tests/stress/keyring_file.py" "$work/bulk-alike.keyring" "$store_items" 'keyring password' --shared
for round in 1 2 3; do
    printf 'bench password\n' | "$bin/security" create-keychain "$work/bulk-restore-$round.keychain-db" >/dev/null
    start=$(date +%s%N)
    printf 'backup password\n' | "$bin/security" import "$work/backup.kcb" -k "$work/bulk-restore-$round.keychain-db" >/dev/null
    elapsed_ms "$start" >> "$work/bulk-backup.txt"
    "$bin/security" delete-keychain "$work/bulk-restore-$round.keychain-db"
    printf 'bench password\n' | "$bin/security" create-keychain "$work/bulk-git-$round.keychain-db" >/dev/null
    start=$(date +%s%N)
    KEYCHAIN_PATH=$work/bulk-git-$round.keychain-db "$bin/security" import-secrets --git-credentials "$work/credential-store" >/dev/null
    elapsed_ms "$start" >> "$work/bulk-git.txt"
    [ "$round" = 3 ] || "$bin/security" delete-keychain "$work/bulk-git-$round.keychain-db"
    start=$(date +%s%N)
    printf 'keyring password\n' | "$bin/security" import-secrets --keyring "$work/bulk-keyring.keyring" > "$work/bulk-keyring.log" 2>&1
    elapsed_ms "$start" >> "$work/bulk-keyring.txt"
    grep -q "import-secrets: $store_items added" "$work/bulk-keyring.log" || { echo "import-secrets --keyring did not add $store_items items:"; cat "$work/bulk-keyring.log"; exit 1; }
    "$bin/security" delete-keychain "$XDG_DATA_HOME/keychains/bulk-keyring.keychain-db"
    start=$(date +%s%N)
    printf 'keyring password\n' | "$bin/security" import-secrets --keyring "$work/bulk-alike.keyring" > "$work/bulk-alike.log" 2>&1
    elapsed_ms "$start" >> "$work/bulk-alike.txt"
    grep -q "import-secrets: $store_items added" "$work/bulk-alike.log" || { echo "import-secrets --keyring did not add $store_items look-alikes:"; cat "$work/bulk-alike.log"; exit 1; }
    "$bin/security" delete-keychain "$XDG_DATA_HOME/keychains/bulk-alike.keychain-db"
done

# --- in-process figures ---------------------------------------------------------------------
say "in-process: SecItem calls at 1,000 and $big items (each keychain made and filled here)"
keyctl session - "$bin/keychain-bench" items 1000 | sed 's/^/small_/' > "$work/small.txt"
keyctl session - "$bin/keychain-bench" items "$big" | sed 's/^/big_/' > "$work/big.txt"

say "sync: a new device's first exchange and one change travelling through a bare repository"
bash "$here/sync.sh" "$bin" "${BENCH_SYNC_ITEMS:-$store_items}" >> "$results"

# --- unlock through PAM ---------------------------------------------------------------------
unlock_note=""
if [ "${BENCH_UNLOCK:-1}" = 0 ]; then
    unlock_note="unlock: skipped (BENCH_UNLOCK=0)"
elif [ "$(id -u)" = 0 ]; then
    say "unlock: pam_open_session of pam_keychain.so against its scrypt time"
    pam_user=kcb$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
    pam_service=keychain-bench-$pam_user
    useradd -m -s /bin/sh "$pam_user"
    echo "$pam_user:Bench-login-1" | chpasswd
    cat > "/etc/pam.d/$pam_service" <<PAM
auth     required  pam_unix.so
auth     optional  $bin/libpam_keychain.so
account  required  pam_unix.so
session  optional  $bin/libpam_keychain.so auto_create lock_on_close
PAM
    # The first login creates the keychain (tuned KDF), the second is its first unlock; then
    # logins alternate with the scrypt alone, so that a slow moment of the machine falls on both.
    printf 'Bench-login-1\n' | "$work/pam_timer" "$pam_service" "$pam_user" 2 >/dev/null
    user_home=$(getent passwd "$pam_user" | cut -d: -f6)
    # A copy the user can run: the checkout may be one only root can read (a clone under /root).
    install -m 0755 "$bin/keychain-bench" "$work/keychain-bench"
    for _ in $(seq 10); do
        printf 'Bench-login-1\n' | "$work/pam_timer" "$pam_service" "$pam_user" 1 >> "$work/open.txt"
        runuser -u "$pam_user" -- "$work/keychain-bench" scrypt "$user_home/.local/share/keychains/login.keychain-db" |
            awk '{print $2 * 1000}' >> "$work/scrypt.txt"
    done
else
    unlock_note="unlock: skipped (needs root to make a user and a PAM service)"
fi

# --- unlock with a TPM binding, and the wrong-password rate the TPM allows -------------------
if command -v swtpm >/dev/null && command -v tpm2_getcap >/dev/null; then
    say "unlock: sealed to a TPM (swtpm) against the same scrypt cost without; the TPM's lockout"
    bash "$here/tpm.sh" "$bin" "$work"
else
    echo "TPM figures: skipped (swtpm and tpm2-tools are not installed)" > "$work/tpm-skipped.txt"
fi

# --- SSH: a signature through the agent, and its memory holding 20 keys -----------------------
if command -v ssh-agent >/dev/null && command -v ssh-add >/dev/null; then
    say "ssh: a signature through keychain-ssh-agent vs ssh-agent (and gnome-keyring's); memory with 20 keys"
    bash "$here/ssh.sh" "$bin" "$work"
else
    echo "SSH figures: skipped (openssh-client is not installed)" > "$work/ssh-skipped.txt"
fi

# --- the broker: reads with the class keys in keychain-broker's keeping vs the kernel keyring's --
say "broker: SecItemCopyMatching, $store_items reads in a row and the git helper's get, through keychain-broker and not"
bash "$here/broker.sh" "$bin" "$work"
say "broker: an SSH signature and a Secret Service lookup through its deputies (keychain-ssh-agent, keychain-secret-service), and not"
bash "$here/broker-desktop.sh" "$bin" "$work"

# --- the table: printed, and written into bench/README.md between its markers ----------------
cat /proc/loadavg >> "$work/load.txt"
python3 "$here/report.py" "$work" "$store_items" "$gnome_items" "$big" "$unlock_note" --readme "$here/README.md" --readme "$root/README.md"
