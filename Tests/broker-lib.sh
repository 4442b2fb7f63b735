# shellcheck shell=bash
# keychain-broker as the system runs it, for the suites that need one (and bench/broker.sh): a
# throwaway system user of its own in group tss (the TPM's, as the package's user; a group of its
# own where there is no tss), started by root with setpriv holding CAP_SYS_PTRACE only (ambient,
# bounding, no_new_privs), in a root-owned 0755 folder under /run. Never under /tmp: a program in
# a folder any user may write to is never identified (KeychainPeers' FileTrust), and the programs
# a case wants trusted must be, as installed ones are.
#
#   broker_suite_requires TOOL...   ends a suite that cannot run here, with its summary line
#   broker_setup USER PREFIX        the user and the folder /run/PREFIX-XXXXXX ($broker_dir) with bin/
#                                   (root's), run/ (the socket's, 0755) and state/ (the broker's, 0700)
#   broker_copy FROM PROGRAM...     root's copies of FROM/PROGRAM in $broker_dir/bin (the build folder
#                                   may be one only root can read); keychain-broker must be one of them
#   broker_start [ARG...]           keychain-broker on $broker_socket, --state $broker_state, --pins
#                                   $broker_pins (set by broker_setup; a suite may change them first)
#                                   and ARGs (--own-program P...); waits for the socket
#   broker_stop                     the broker stopped; its user, folder, state and pins stay
#   broker_teardown                 broker_stop, then the state key in its uid's persistent keyring,
#                                   its user and group, its folder; safe twice, or before any setup
#   client_setup USER HOME          the throwaway user whose keychain the broker keeps
#   client_teardown USER            its processes, its persistent keyring's keys, the user
# Each step reads and sets broker_user, broker_group, broker_dir, broker_socket, broker_state,
# broker_pins, broker_pid and the array broker_setpriv (the setpriv command, for a starter other
# than broker_start, such as systemd-socket-activate). Every step holds under `set -e`.

# broker_suite_requires TOOL...: where the suite cannot run, its summary line and its end:
# skipped without root (the broker's system user and the test user need it), failed without TOOL.
broker_suite_requires() {
    local tool
    if [ "$(id -u)" != 0 ]; then
        echo "skipped: a system user for the broker and a test user need root"
        printf '\n0 passed, 0 failed, 1 skipped\n'
        exit 0
    fi
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "missing $tool: run make deps"; printf '\n0 passed, 1 failed\n'; exit 1; }
    done
}

broker_user=${broker_user:-} broker_group='' broker_dir='' broker_socket='' broker_state='' broker_pins='' broker_pid=''
broker_setpriv=()

# clear_persistent_keyring USER: the keys in USER's persistent keyring (root may reach any uid's),
# which outlives the user for days; uids are reused, and the next user would be taken for this one.
clear_persistent_keyring() {
    keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s "$1")"' - "$(id -u "$1")" >/dev/null 2>&1 || :
}

broker_setup() {
    broker_user=$1 broker_group=tss
    getent group tss >/dev/null || broker_group=$broker_user
    # One a run that died left behind.
    if id "$broker_user" >/dev/null 2>&1; then userdel "$broker_user" >/dev/null 2>&1 || :; fi
    if [ "$broker_group" = tss ]; then
        useradd -r -M -d /nonexistent -s /usr/sbin/nologin -g tss "$broker_user" || return 1
    else
        useradd -r -M -d /nonexistent -s /usr/sbin/nologin -U "$broker_user" || return 1
    fi
    broker_setpriv=(setpriv --reuid="$broker_user" --regid="$broker_group" --clear-groups
        '--inh-caps=-all,+sys_ptrace' --ambient-caps=+sys_ptrace '--bounding-set=-all,+sys_ptrace' --no-new-privs)
    broker_dir=$(mktemp -d "/run/$2-XXXXXX") || return 1
    chmod 755 "$broker_dir" && mkdir "$broker_dir/bin" "$broker_dir/run" &&
        chown "$broker_user:$broker_group" "$broker_dir/run" && chmod 755 "$broker_dir/run" || return 1
    broker_socket=$broker_dir/run/socket
    broker_state=$broker_dir/state broker_pins=$broker_dir/state
    broker_folder "$broker_state"
}

# broker_folder DIR: a folder of the broker's own (0700), for state or pins.
broker_folder() {
    mkdir -p "$1" && chown "$broker_user:$broker_group" "$1" && chmod 700 "$1"
}

broker_copy() {
    local from=$1 program; shift
    for program in "$@"; do cp "$from/$program" "$broker_dir/bin/" || return 1; done
    chmod 755 "$broker_dir/bin" "$broker_dir/bin"/*
}

broker_start() {
    local tries=400
    rm -f "$broker_socket"
    "${broker_setpriv[@]}" "$broker_dir/bin/keychain-broker" --socket "$broker_socket" --state "$broker_state" \
        --pins "$broker_pins" "$@" --foreground 2>>"$broker_dir/broker.log" &
    broker_pid=$!
    while [ ! -S "$broker_socket" ] && [ $tries -gt 0 ]; do
        kill -0 "$broker_pid" 2>/dev/null || { echo "the broker exited:"; cat "$broker_dir/broker.log"; return 1; }
        sleep 0.05
        tries=$((tries - 1))
    done
    [ -S "$broker_socket" ] || { echo "the broker made no socket at $broker_socket"; return 1; }
}

# broker_start_for_service BIN: after broker_setup, a broker for keychain-secret-service's suites
# (desktop, kde): the service's copy from BIN its deputy and one of the keychain's own programs
# (as /usr/bin/keychain-secret-service is), and $broker_dir/bin/answer the stand-in answerer,
# which appends each question to $broker_dir/questions and answers as $broker_dir/answer.mode
# says (deny, once or always, with the password "pw"). Exports broker_dir and broker_socket.
broker_start_for_service() {
    broker_copy "$1" keychain-broker keychain-secret-service || return 1
    cat > "$broker_dir/bin/answer" << EOS
#!/bin/sh
cat >> "$broker_dir/questions"
echo ---- >> "$broker_dir/questions"
mode=\$(cat "$broker_dir/answer.mode")
if [ "\$mode" = deny ]; then echo deny; else printf '%s\\npw\\n' "\$mode"; fi
EOS
    chmod 755 "$broker_dir/bin/answer"
    broker_start --deputy "$broker_dir/bin/keychain-secret-service" --own-program "$broker_dir/bin/keychain-secret-service" || return 1
    export broker_dir broker_socket
}

broker_stop() {
    if [ -n "$broker_pid" ]; then
        kill -TERM "$broker_pid" 2>/dev/null || :
        wait "$broker_pid" 2>/dev/null || :
        broker_pid=
    fi
}

broker_teardown() {
    broker_stop
    if [ -n "$broker_user" ] && id "$broker_user" >/dev/null 2>&1; then
        # Its state key: in its uid's persistent keyring, not in its folder.
        clear_persistent_keyring "$broker_user"
        userdel "$broker_user" >/dev/null 2>&1 || :
        if getent group "$broker_user" >/dev/null; then groupdel "$broker_user" 2>/dev/null || :; fi
    fi
    broker_user=
    if [ -n "$broker_dir" ]; then rm -rf "$broker_dir"; fi
    broker_dir=
}

# client_setup USER HOME: the throwaway ordinary user whose keychain the broker keeps, its home
# HOME not made here; a uid is reused once its user is deleted, but not its persistent keyring:
# keys another suite's user left there would be taken for this one's.
client_setup() {
    useradd -M -d "$2" -s /bin/sh "$1" || return 1
    clear_persistent_keyring "$1"
}

# client_teardown USER: its processes, its persistent keyring's keys, the user.
client_teardown() {
    if id "$1" >/dev/null 2>&1; then
        pkill -KILL -u "$1" 2>/dev/null || :
        clear_persistent_keyring "$1"
        userdel "$1" >/dev/null 2>&1 || :
    fi
}
