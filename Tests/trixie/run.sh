#!/usr/bin/env bash
# Debian 13's own programs, each met as it runs there, not through a stand-in: OpenSSH 10's
# user ssh-agent.socket, gnome-keyring 48 with gcr4's gcr-ssh-agent.socket, KDE's kwalletd6,
# OpenSSH 10's ssh, ssh-add and sshd, dbus 1.16. Each case runs in a trixie root
# (Tests/trixie/chroot.sh, built once by mmdebstrap and cached), made writable for the case by an
# overlay in a mount namespace of its own, with the package's files installed as the .deb installs
# them (the units, the environment generator, the D-Bus activation file; the programs from BIN,
# bound read-only: the tools link the Swift runtime statically) and a throwaway user whose session
# is systemd 257's own user manager (in a cgroup of its own) with its dbus.socket session bus:
# what the user's services and the login shell get on a Debian 13 desktop. The cases are in
# Tests/trixie/cases.sh. Skips, saying why, where the root cannot be built (no mmdebstrap, no
# mirror) or no user manager can run here (no cgroup v2). TRIXIE_ONLY=CASE runs that one case.
# Usage: Tests/trixie/run.sh [BIN]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"
# shellcheck source=Tests/trixie/chroot.sh
. "$here/chroot.sh"

# The throwaway user inside the root (its passwd is the overlay's: nothing of the machine's).
user=kcuser uid=4711

# session CASE_DIR ROOT BIN CASE: in a mount namespace of its own (unshare -m), the case's root
# set up, its user's session started, the case run as that user, the session stopped.
session() {
    local case_dir=$1 lower=$2 bin=$3 name=$4 root cgroup run manager status=0 _
    root=$case_dir/root run=/run/user/$uid
    mkdir -p "$case_dir/upper" "$case_dir/work" "$root"
    mount -t overlay overlay -o "lowerdir=$lower,upperdir=$case_dir/upper,workdir=$case_dir/work" "$root" || return 1
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    mount -t tmpfs -o mode=755 tmpfs "$root/run"
    mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
    # The user manager wants a cgroup v2 folder it may write: one of the case's own, delegated;
    # the case's commands in a sibling, so that whatever either leaves is found at the end.
    cgroup=$(trixie_cgroup_root)/keychain-trixie-$$
    mkdir "$cgroup" "$cgroup/manager" "$cgroup/case" || return 1
    mount --bind "$(trixie_cgroup_root)" "$root/sys/fs/cgroup"
    # The case's user reads the scripts it runs: copies of them, since the checkout may be in a
    # folder only root can read (a clone under /root, as CI makes it).
    local mount file
    for file in Tests/trixie/cases.sh Tests/kde/kde.py Tests/secret-service/pinentry.sh; do
        install -D -m 0755 "$repo/$file" "$case_dir/src/$file"
    done
    chmod -R go+rX "$case_dir/src" && chmod go+x "$case_dir"
    for mount in "$bin:/keychain/bin" "$case_dir/src:/keychain/src"; do
        [ -d "${mount%%:*}" ] || continue
        mkdir -p "$root${mount#*:}"
        mount --bind "${mount%%:*}" "$root${mount#*:}" && mount -o remount,bind,ro "$root${mount#*:}"
    done
    install_package "$root"
    chroot "$root" useradd -m -u "$uid" -s /bin/bash "$user"
    mkdir -p "$root$run" "$root/run/systemd/system" && chown "$uid:$uid" "$root$run" && chmod 700 "$root$run"
    chown -R "$uid:$uid" "$cgroup/manager"
    # As logind would start it: the user's own manager, which runs the environment generators
    # and starts sockets.target (the session bus, the agents' sockets).
    (
        echo "$BASHPID" > "$cgroup/manager/cgroup.procs"
        exec chroot --userspec="$uid:$uid" "$root" env -i HOME="/home/$user" USER="$user" LOGNAME="$user" SHELL=/bin/bash \
            PATH=/usr/local/bin:/usr/bin:/bin XDG_RUNTIME_DIR="$run" LANG=C.UTF-8 /usr/lib/systemd/systemd --user
    ) > "$case_dir/manager.log" 2>&1 &
    manager=$!
    for _ in $(seq 200); do
        [ -S "$root$run/systemd/private" ] && [ -S "$root$run/bus" ] && break
        kill -0 "$manager" 2>/dev/null || break
        sleep 0.1
    done
    if [ -S "$root$run/systemd/private" ]; then
        # The case, as the user, in a login shell's environment (no SSH_AUTH_SOCK of the machine's).
        (
            echo "$BASHPID" > "$cgroup/case/cgroup.procs"
            exec timeout 240 chroot --userspec="$uid:$uid" "$root" env -i HOME="/home/$user" USER="$user" LOGNAME="$user" SHELL=/bin/bash \
                PATH=/keychain/bin:/usr/local/bin:/usr/bin:/bin XDG_RUNTIME_DIR="$run" DBUS_SESSION_BUS_ADDRESS="unix:path=$run/bus" \
                LANG=C.UTF-8 TRIXIE_TRACE="${TRIXIE_TRACE:-}" bash /keychain/src/Tests/trixie/cases.sh "$name"
        ) || status=$?
    else
        echo "the user manager did not start:"; cat "$case_dir/manager.log"; status=1
    fi
    # The session ended as at logout: the manager stops its units; then whatever is left in the
    # case's cgroups (only what this case started: a daemon forked away from the case too) is killed.
    kill "$manager" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$manager" 2>/dev/null || break; sleep 0.1; done
    [ -e "$cgroup/cgroup.kill" ] && echo 1 > "$cgroup/cgroup.kill"
    wait "$manager" 2>/dev/null
    for _ in $(seq 50); do find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null; [ -d "$cgroup" ] || break; sleep 0.1; done
    return "$status"
}

# Where this machine has cgroup v2: /sys/fs/cgroup itself, or a hybrid's /sys/fs/cgroup/unified.
trixie_cgroup_root() {
    local folder
    for folder in /sys/fs/cgroup /sys/fs/cgroup/unified; do
        [ "$(stat -f -c %T "$folder" 2>/dev/null)" = cgroup2fs ] && { echo "$folder"; return 0; }
    done
    return 1
}

# The package's files in the root, where the .deb puts them (PREFIX /usr), the programs those of
# BIN (/keychain/bin): the units, the environment generator, the D-Bus activation file.
install_package() {
    local root=$1 units=$1/usr/lib/systemd/user
    sed 's|@BINDIR@|/keychain/bin|' "$repo/Sources/keychain-secret-service/dbus/org.freedesktop.secrets.service.in" \
        > "$root/usr/share/dbus-1/services/org.keychain-linux.secrets.service"
    sed 's|@BINDIR@|/keychain/bin|' "$repo/Sources/keychain-secret-service/dbus/keychain-secret-service.service.in" \
        > "$units/keychain-secret-service.service"
    sed 's|@BINDIR@|/keychain/bin|' "$repo/packaging/systemd/keychain-ssh-agent.service.in" > "$units/keychain-ssh-agent.service"
    install -m 0644 "$repo/packaging/systemd/keychain-ssh-agent.socket" "$units/"
    install -d "$root/usr/lib/systemd/user-environment-generators"
    install -m 0755 "$repo/packaging/systemd/keychain-ssh-agent-environment" \
        "$root/usr/lib/systemd/user-environment-generators/20-keychain-ssh-agent"
}

if [ "${1:-}" = --session ]; then
    shift
    session "$@"
    exit
fi

bin=$(realpath "${1:-.build/debug}")
fresh() { case_dir=$(mktemp -d /tmp/keychain-trixie-XXXXXX); }
finish() { rm -rf "$case_dir"; }
# in_trixie CASE: the case of cases.sh in its own root and session, bounded in time.
in_trixie() {
    timeout 300 unshare -m --propagation private bash "$here/run.sh" --session "$case_dir" "$root" "$bin" "$1"
}

cases=(programs_are_debian_13s gcr_and_openssh_agents_handed_over_and_back openssh_10_tools_with_the_agent
    kwalletd6_import_enable_disable)
if [ "$(id -u)" != 0 ]; then
    skip "Debian 13's programs: root is needed (mmdebstrap, mounts, chroot)"
elif ! command -v unshare >/dev/null; then
    skip "Debian 13's programs: no unshare here"
elif ! trixie_cgroup_root >/dev/null; then
    skip "Debian 13's programs: no cgroup v2 here, where systemd 257's user manager could run"
elif ! root=$(trixie_root 2>"${TMPDIR:-/tmp}/trixie-root.$$"); then
    skip "Debian 13's programs: $(tail -n 1 "${TMPDIR:-/tmp}/trixie-root.$$")"
else
    echo "trixie root: $root"
    for name in "${cases[@]}"; do
        [ -z "${TRIXIE_ONLY:-}" ] || [ "$TRIXIE_ONLY" = "$name" ] || continue
        check "$name" in_trixie "$name"
    done
fi
rm -f "${TMPDIR:-/tmp}/trixie-root.$$"
summary
