#!/usr/bin/env bash
# `make install` as a machine without the Swift toolchain gets it: the staged `security`, both
# credential helpers and pam_keychain.so are stripped and work with /opt/swift hidden (a tmpfs
# over it in a private mount namespace). Builds the release products with `make release`, then
# stages them with `make install DESTDIR=...`.
# First, as any user: `make install` builds nothing and installs no package (it fails in one line
# on a tree where nothing is built), and `make release` and `make deb` install only what the build
# needs, never the test toolchain (a registry listening on *:5000, docker, ...).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/../lib.sh"

# Stubs that record every call of what could install a package. dpkg-query finds nothing
# installed, so a target's install step asks apt-get for every package it wants; sudo (used when
# not root) runs its command, the stubs' apt-get; swift builds nothing (passed as SWIFT=...,
# since the Makefile puts /opt/swift first on the PATH).
make_stubs() {
    local tool
    mkdir -p "$stubs"
    for tool in apt-get apt swift; do
        printf '#!/bin/sh\necho "%s $*" >> "%s"\n' "$tool" "$calls" > "$stubs/$tool"
    done
    printf '#!/bin/sh\necho "sudo $*" >> "%s"\nexec "$@"\n' "$calls" > "$stubs/sudo"
    printf '#!/bin/sh\nexit 1\n' > "$stubs/dpkg-query"
    chmod 755 "$stubs"/*
}

fresh() {
    case_dir=$(mktemp -d /tmp/kc-install-case-XXXXXX)
    tree=$case_dir/tree stubs=$case_dir/stubs calls=$case_dir/calls
    : > "$calls"
    copy_tree "$repo" "$tree"
    make_stubs
}
finish() { rm -rf "$case_dir"; }

# stubbed COMMAND...: runs COMMAND in the copy with the stubs first on the PATH.
# Not the MAKEFLAGS of a `make test` around this suite: its -s, -j or jobserver would change the output.
stubbed() { (cd "$tree" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL PATH="$stubs:$PATH" "$@"); }

# The packages the stubs were asked to install.
asked_for() { sed -n 's/^apt-get install //p' "$calls" | tr ' ' '\n' | { grep -v -e '^-' -e '^$' || true; } | sort -u; }

# What only the tests use: none of it may come with building or packaging.
test_only="docker-registry docker.io skopeo pamtester lintian gcc polkitd pkexec apache2-utils libpam-wrapper dbus-daemon
           libsecret-tools python3-secretstorage golang-docker-credential-helpers curl sqlite3 keyutils shellcheck man-db"

install_without_build() {
    status=0
    out=$(stubbed make install DESTDIR="$case_dir/stage" SWIFT="$stubs/swift" 2>&1) || status=$?
    echo "$out"
    [ "$status" -ne 0 ] || { echo "make install succeeded with nothing built"; return 1; }
    expect 1 "$(printf '%s\n' "$out" | wc -l)" "one line of output"
    [[ "$out" == *'nothing is built: run `make release` first, then `sudo make install`'* ]] || { echo "not the expected line"; return 1; }
    [ ! -s "$calls" ] || { echo "called:"; cat "$calls"; return 1; }
    [ ! -e "$case_dir/stage" ] || { echo "installed something:"; find "$case_dir/stage"; return 1; }
}

only_build_packages() {
    local target package
    for target in release deb; do
        : > "$calls"
        # Whether it succeeds does not matter (deb stops at `make install`: the stub swift built nothing).
        stubbed make "$target" SWIFT="$stubs/swift" > "$case_dir/$target.log" 2>&1 || true
        asked_for > "$case_dir/$target.packages"
        echo "make $target asks for: $(tr '\n' ' ' < "$case_dir/$target.packages")"
        grep -qx libsqlite3-dev "$case_dir/$target.packages" || { echo "make $target installs no build package"; cat "$case_dir/$target.log"; return 1; }
        for package in $test_only; do
            if grep -qx "$package" "$case_dir/$target.packages"; then echo "make $target installs $package"; return 1; fi
        done
    done
    grep -qx dpkg-dev "$case_dir/deb.packages" || { echo "make deb does not install dpkg-dev"; return 1; }
    # The release target also makes the man pages, so that `make install` needs nothing built.
    [ -f "$tree/.build/man/security.1.gz" ] || { echo "make release made no man pages"; return 1; }
}

check "make install on a tree where nothing is built: one line, non-zero, no apt, no sudo, no build" install_without_build
check "make release and make deb install only build packages, never the test toolchain" only_build_packages

if [ "$(id -u)" != 0 ]; then
    skip "hiding /opt/swift takes a mount namespace, and the PAM case a user: both need root"
    summary
    exit
fi

stage='' install_log=''
cleanup() { [ -z "$stage" ] || rm -rf "$stage"; [ -z "$install_log" ] || rm -f "$install_log"; }
trap cleanup EXIT
# Anyone can read it: the PAM case runs the staged `security` as a throwaway user.
stage=$(mktemp -d /tmp/kc-install-XXXXXX)
chmod 755 "$stage"
install_log=$(mktemp /tmp/kc-install-log-XXXXXX)
cd /

installed=false
if make -s -C "$repo" release > "$install_log" 2>&1 && make -s -C "$repo" install DESTDIR="$stage" >> "$install_log" 2>&1; then
    installed=true
fi
bin=$stage/usr/local/bin
module=$(find "$stage" -name pam_keychain.so | head -1)
tools="$bin/security $bin/git-credential-keychain $bin/docker-credential-keychain"
secret_service=$bin/keychain-secret-service
ssh_agent=$bin/keychain-ssh-agent
units=$stage/usr/local/lib/systemd/user
libexec=$stage/usr/local/libexec
system_units=$stage/usr/local/lib/systemd/system
generator=$stage/usr/local/lib/systemd/user-environment-generators/20-keychain-ssh-agent
for f in $tools $secret_service $ssh_agent $module; do [ -f "$f" ] && echo "staged $(du -k "$f" | cut -f1) KiB  ${f#"$stage"}"; done

# Runs a command in a mount namespace where /opt/swift is an empty tmpfs.
hidden() { unshare -m bash -c 'mount -t tmpfs none /opt/swift && exec "$@"' hidden "$@"; }

fresh() {
    case_dir=$(mktemp -d /tmp/kc-install-case-XXXXXX)
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config
    unset KEYCHAIN_PATH
    # Only the PAM case makes this user and service; finish removes them if they exist.
    user=kci$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
    service=keychain-install-test-$user
    # The broker cases' system user, in place of keychain-broker.
    broker_user=kcb$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
}

finish() {
    hidden "$bin/security" delete-keychain >/dev/null 2>&1
    if id "$user" >/dev/null 2>&1; then
        setpriv --reuid="$user" --regid="$user" --init-groups keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1
        userdel -r "$user" >/dev/null 2>&1
    fi
    rm -f "/etc/pam.d/$service"
    if id "$broker_user" >/dev/null 2>&1; then
        pkill -KILL -u "$broker_user" 2>/dev/null
        userdel "$broker_user" >/dev/null 2>&1
    fi
    rm -rf "$case_dir"
}

make_install() {
    $installed || { cat "$install_log"; return 1; }
    for f in $tools $secret_service $ssh_agent $module; do [ -f "$f" ] || { echo "missing: $f"; return 1; }; done
    # Where xdg-desktop-portal reads portals, whatever PREFIX is.
    grep -qx 'Interfaces=org.freedesktop.impl.portal.Secret' "$stage/usr/share/xdg-desktop-portal/portals/keychain.portal"
    # xdg-desktop-portal 1.16 (Debian 12) refuses a .portal file without UseIn.
    grep -q '^UseIn=.*kde' "$stage/usr/share/xdg-desktop-portal/portals/keychain.portal"
}

stripped() {
    for f in $tools $secret_service $ssh_agent $module; do
        if readelf -SW "$f" | grep -qE '\.symtab|\.debug_'; then echo "not stripped: $f"; return 1; fi
    done
    # The module keeps its dynamic symbols: PAM finds pam_sm_* through them.
    nm -D --defined-only "$module" | grep -q ' pam_sm_authenticate$'
}

self_contained() {
    for f in $tools; do
        if readelf -lW "$f" | grep -q 'program interpreter'; then echo "dynamically linked: $f"; return 1; fi
    done
    if readelf -dW "$module" | grep NEEDED | grep -qi swift; then echo "the module needs a Swift library"; return 1; fi
    # The Secret Service links libsystemd, which has no static library: the Swift runtime is linked in.
    if readelf -dW "$secret_service" | grep NEEDED | grep -qi swift; then echo "the Secret Service needs a Swift library"; return 1; fi
    if readelf -dW "$ssh_agent" | grep NEEDED | grep -qi swift; then echo "the SSH agent needs a Swift library"; return 1; fi
    # The control: the toolchain itself does not start where these tools must.
    ! hidden /opt/swift/usr/bin/swift --version >/dev/null 2>&1
}

tools_without_toolchain() {
    [[ "$(hidden "$bin/security" --help)" == OVERVIEW:* ]]
    printf 'pw\n' | hidden "$bin/security" create-keychain
    hidden "$bin/security" add-generic-password -a alice -s staged -w 'staged secret'
    expect 'staged secret' "$(hidden "$bin/security" find-generic-password -a alice -s staged -w)"

    printf 'protocol=https\nhost=git.example.org\nusername=bob\npassword=git-secret\n\n' | hidden "$bin/git-credential-keychain" store
    out=$(printf 'protocol=https\nhost=git.example.org\n\n' | hidden "$bin/git-credential-keychain" get)
    expect git-secret "$(echo "$out" | sed -n 's/^password=//p')" "password from git-credential-keychain get"

    echo '{"ServerURL":"https://registry.example.org","Username":"carol","Secret":"docker-secret"}' |
        hidden "$bin/docker-credential-keychain" store
    out=$(echo https://registry.example.org | hidden "$bin/docker-credential-keychain" get)
    [[ "$out" == *'"Secret":"docker-secret"'* && "$out" == *'"Username":"carol"'* ]] || { echo "get gave: $out"; return 1; }
    expect 'docker-secret' "$(hidden "$bin/security" find-internet-password -s registry.example.org -w)"
}

service_without_toolchain() {
    printf 'pw\n' | hidden "$bin/security" create-keychain
    # A session bus that activates nothing: the machine's gnome-keyring must not answer instead.
    mkdir "$case_dir/no-services"
    sed "s|@SERVICES@|$case_dir/no-services|" "$here/../secret-service/session.conf" > "$case_dir/session.conf"
    out=$(hidden dbus-run-session --config-file="$case_dir/session.conf" -- bash -c '
        "$1" & pid=$!
        for i in $(seq 50); do
            dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.NameHasOwner \
                string:org.freedesktop.secrets 2>/dev/null | grep -q true && break
            sleep 0.1
        done
        printf staged-service-secret | secret-tool store --label=staged application install-test &&
            secret-tool lookup application install-test
        kill $pid' service "$secret_service")
    expect staged-service-secret "$out" "secret-tool through the staged keychain-secret-service"
    expect staged-service-secret "$(hidden "$bin/security" find-generic-password -l staged -w)" "the same item through security"
}

module_without_toolchain() {
    local password='Install-pass-1'
    useradd -m -s /bin/sh "$user"
    echo "$user:$password" | chpasswd
    local home keychain
    home=$(getent passwd "$user" | cut -d: -f6)
    keychain=$home/.local/share/keychains/login.keychain-db
    cat > "/etc/pam.d/$service" <<PAM
auth     required  pam_unix.so
auth     optional  $module
account  required  pam_unix.so
session  required  pam_unix.so
session  optional  $module auto_create
PAM
    printf '%s\n' "$password" | hidden pamtester "$service" "$user" authenticate open_session >/dev/null
    [ -f "$keychain" ] || { echo "no keychain was created at login"; return 1; }
    state=$(hidden setpriv --reuid="$user" --regid="$user" --init-groups env -i HOME="$home" "$bin/security" status |
        awk '$1 == "WhenUnlocked:" { print $2 }')
    expect unlocked "$state" "WhenUnlocked after a login through the staged module"
}

ssh_agent_files() {
    [ -x "$ssh_agent" ] && [ -x "$generator" ] || { echo "no agent or no environment generator"; return 1; }
    grep -qx 'ExecStart=/usr/local/bin/keychain-ssh-agent -D --systemd' "$units/keychain-ssh-agent.service"
    grep -qx 'ListenStream=%t/keychain/ssh-agent.socket' "$units/keychain-ssh-agent.socket"
    [ -f "$stage/usr/local/share/man/man1/keychain-ssh-agent.1.gz" ] || { echo "no man page"; return 1; }
    mkdir -p "$case_dir/units" "$case_dir/run"
    sed "s|/usr/local/bin|$bin|" "$units/keychain-ssh-agent.service" > "$case_dir/units/keychain-ssh-agent.service"
    cp "$units/keychain-ssh-agent.socket" "$case_dir/units/"
    XDG_RUNTIME_DIR=$case_dir/run systemd-analyze --man=no --user verify "$case_dir"/units/keychain-ssh-agent.{socket,service}
}

# SSH_AUTH_SOCK from the generator only for a user who enabled the socket unit, and not for one
# who masked it.
ssh_agent_environment() {
    local wants=$case_dir/config/systemd/user/sockets.target.wants
    run_generator() { env -i HOME="$case_dir" XDG_CONFIG_HOME="$case_dir/config" XDG_RUNTIME_DIR=/run/user/4242 "$generator"; }
    expect '' "$(run_generator)" "nothing for a user who did not enable the agent"
    mkdir -p "$wants"
    ln -s "$units/keychain-ssh-agent.socket" "$wants/keychain-ssh-agent.socket"
    expect 'SSH_AUTH_SOCK=/run/user/4242/keychain/ssh-agent.socket' "$(run_generator)" "the enabled user's socket"
    expect '' "$(env -i HOME="$case_dir" XDG_CONFIG_HOME="$case_dir/config" "$generator")" "nothing without XDG_RUNTIME_DIR"
}

# What a script that starts ssh-agent sees, with the staged agent in its place: the same lines
# (numbers and random names aside), ssh-add talking to it, -k stopping it, a command run under it.
ssh_agent_without_toolchain() {
    command -v ssh-agent >/dev/null && command -v ssh-add >/dev/null || { echo "openssh-client missing"; return 1; }
    local shape='s/[0-9][0-9]*/N/g; s|/ssh-[A-Za-z0-9]*/|/ssh-X/|'
    local ours theirs listed status
    unset SSH_AUTH_SOCK SSH_AGENT_PID
    export TMPDIR=/tmp
    ours=$(cd / && hidden "$ssh_agent" -s) || return 1
    theirs=$(cd / && ssh-agent -s) || return 1
    (eval "$theirs" >/dev/null; ssh-agent -k >/dev/null)
    expect "$(sed "$shape" <<< "$theirs")" "$(sed "$shape" <<< "$ours")" "ssh-agent -s's lines"
    eval "$ours" >/dev/null
    expect 600 "$(stat -c %a "$SSH_AUTH_SOCK")" "the socket's mode"
    expect 700 "$(stat -c %a "$(dirname "$SSH_AUTH_SOCK")")" "its folder's mode"
    status=0
    listed=$(ssh-add -l 2>&1) || status=$?
    expect 1 "$status" "ssh-add -l's status with no identities"
    expect 'The agent has no identities.' "$listed"
    local socket=$SSH_AUTH_SOCK pid=$SSH_AGENT_PID killed
    killed=$(hidden "$ssh_agent" -k)
    expect "$(printf 'unset SSH_AUTH_SOCK;\nunset SSH_AGENT_PID;\necho Agent pid %s killed;' "$pid")" "$killed" "ssh-agent -k's lines"
    for _ in $(seq 50); do [ -e "$socket" ] || break; sleep 0.1; done
    [ ! -e "$socket" ] && [ ! -e "$(dirname "$socket")" ] || { echo "the socket or its folder was left behind"; return 1; }
    local csh
    csh=$(cd / && SHELL=/bin/tcsh hidden "$ssh_agent")
    [[ "$(head -1 <<< "$csh")" == 'setenv SSH_AUTH_SOCK /tmp/ssh-'*';' ]] || { echo "not csh's lines: $csh"; return 1; }
    pid=$(sed -n 's/^echo Agent pid \([0-9]*\);$/\1/p' <<< "$csh")
    expect 'unsetenv SSH_AUTH_SOCK;' "$(SSH_AGENT_PID=$pid hidden "$ssh_agent" -c -k | head -1)" "csh's -k"
    status=0
    hidden "$ssh_agent" sh -c 'ssh-add -l >/dev/null 2>&1; [ $? = 1 ] && exit 7; exit 3' || status=$?
    expect 7 "$status" "a command run under the agent, its status"
}

# The options ssh-agent (OpenSSH 9.2) accepts, and those it refuses, side by side: each accepted
# set serves ssh-add -l in the foreground; each refused one exits 1 and makes no socket.
ssh_agent_options_as_ssh_agent() {
    local accepted=("-D -t 1h30m" "-D -t 3600" "-D -E md5" "-D -E SHA512" "-D -O no-restrict-websafe" "-D -P /usr/lib/pkcs11" "-d" "-s -D" "-c -D")
    # With ssh-agent's status: 1 for its usage(), 255 for its fatal().
    local refused=("1 -t 1x" "1 -t" "255 -E bogus" "255 -O bogus" "255 -P a -P b" "1 -d -D" "1 -c -s" "1 -x" "1 -D true" "1 -k true")
    local options program status socket listed pid
    for program in ssh-agent "$ssh_agent"; do
        for options in "${accepted[@]}"; do
            socket=$case_dir/agent.$RANDOM
            # shellcheck disable=SC2086 # the options are words on purpose
            (cd / && exec "$program" -a "$socket" $options) > /dev/null 2>&1 &
            pid=$!
            # Bound is not yet listening (either agent): a refused connection is tried again.
            for _ in $(seq 50); do
                status=0
                listed=$(SSH_AUTH_SOCK=$socket ssh-add -l 2>&1) || status=$?
                [ "$status" = 2 ] || break
                sleep 0.1
            done
            kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
            [ "$status" = 1 ] && [ "$listed" = 'The agent has no identities.' ] || { echo "$program $options: [$status] $listed"; return 1; }
        done
        for options in "${refused[@]}"; do
            socket=$case_dir/agent.$RANDOM
            status=0
            # shellcheck disable=SC2086
            (cd / && exec timeout 5 "$program" -a "$socket" ${options#* }) > /dev/null 2>&1 || status=$?
            [ "$status" = "${options%% *}" ] && [ ! -e "$socket" ] ||
                { echo "$program ${options#* }: status $status, socket $([ -e "$socket" ] && echo made || echo none)"; return 1; }
        done
    done
}

# The systemd socket unit's way: descriptor 3 handed over (systemd-socket-activate as systemd would).
ssh_agent_socket_activation() {
    command -v systemd-socket-activate >/dev/null || { echo "systemd-socket-activate missing"; return 1; }
    mkdir -m 700 "$case_dir/run"
    local socket=$case_dir/run/agent.socket status listed
    systemd-socket-activate -l "$socket" -- "$ssh_agent" -D --systemd 2>"$case_dir/agent.log" &
    local activator=$!
    for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
    status=0
    listed=$(SSH_AUTH_SOCK=$socket ssh-add -l 2>&1) || status=$?
    kill "$activator" 2>/dev/null || true; wait "$activator" 2>/dev/null || true
    expect 1 "$status" "ssh-add -l through an activated agent"
    expect 'The agent has no identities.' "$listed"
}

# The broker's files: its program and start script beside keychain-tpm-helper, its system units
# naming them, its sysusers file and the ptrace drop-in; the units as systemd reads them (the
# service's program, the staged one: the unit names it by PREFIX).
broker_files() {
    [ -x "$libexec/keychain-broker" ] && [ -x "$libexec/keychain-broker-start" ] || { echo "no broker or no start script"; return 1; }
    grep -qx 'ExecStart=/usr/local/libexec/keychain-broker --foreground' "$system_units/keychain-broker.service"
    grep -qx 'ListenSequentialPacket=/run/keychain-broker/socket' "$system_units/keychain-broker.socket"
    grep -qx 'SocketMode=0666' "$system_units/keychain-broker.socket"
    grep -qx 'WantedBy=sockets.target' "$system_units/keychain-broker.socket"
    grep -qx 'User=keychain-broker' "$system_units/keychain-broker.service"
    grep -qx 'AmbientCapabilities=CAP_SYS_PTRACE' "$system_units/keychain-broker.service"
    grep -qx 'RuntimeDirectoryPreserve=yes' "$system_units/keychain-broker.service"
    grep -qx 'StateDirectory=keychain-broker' "$system_units/keychain-broker.service"
    if grep -q '^ProtectProc=invisible' "$system_units/keychain-broker.service"; then echo "ProtectProc=invisible hides the callers"; return 1; fi
    grep -qx 'u keychain-broker - "Keychain broker" /nonexistent' "$stage/usr/local/lib/sysusers.d/keychain-broker.conf"
    grep -qx 'm keychain-broker tss' "$stage/usr/local/lib/sysusers.d/keychain-broker.conf"
    grep -qx -- '-kernel.yama.ptrace_scope = 1' "$stage/etc/sysctl.d/61-keychain-ptrace.conf"
    command -v systemd-analyze >/dev/null || { echo "systemd-analyze missing"; return 1; }
    mkdir -p "$case_dir/units"
    sed "s|/usr/local/libexec|$libexec|" "$system_units/keychain-broker.service" > "$case_dir/units/keychain-broker.service"
    cp "$system_units/keychain-broker.socket" "$case_dir/units/"
    # verify warns, and still succeeds, about a setting it ignores: nothing may be printed.
    local said
    said=$(systemd-analyze --man=no verify "$case_dir"/units/keychain-broker.{socket,service} 2>&1) || { echo "$said"; return 1; }
    expect '' "$said" "systemd-analyze verify's complaints"
    # The system call groups the filter names, as this systemd knows them: ptrace among them.
    systemd-analyze syscall-filter @debug | grep -qx '    ptrace'
}

# The start script where systemd does not run: a program in the broker's place (a stand-in that
# listens on the socket it is given) runs as the broker's user, in group tss, with CAP_SYS_PTRACE
# alone (effective, permitted, inheritable, ambient and bounding), no new privileges, no core
# file, an environment of its own and a session of its own; the socket's folder is the user's,
# 0755. Started again: already running. --stop stops it. A program that exits at once: a failure.
broker_start_script() {
    command -v setpriv >/dev/null && command -v python3 >/dev/null || { echo "setpriv or python3 missing"; return 1; }
    useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$broker_user"
    chmod 755 "$case_dir"
    cat > "$case_dir/stand-in" <<'STANDIN'
#!/bin/sh
# keychain-broker --foreground --socket PATH --state DIR [OPTION...] (without the PWD sh adds to
# what it was given); its arguments, in its state folder.
printf '%s\n' "$@" > "$5/arguments"
exec env -u PWD python3 -c 'import signal, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen()
signal.pause()' "$3"
STANDIN
    chmod 755 "$case_dir/stand-in"
    local start=$libexec/keychain-broker-start run=$case_dir/run pid_file=$case_dir/broker.pid pid status said
    local options="--user $broker_user --socket $run/socket --state $run --pins $case_dir/pins --pid-file $pid_file"
    # shellcheck disable=SC2086 # the options are words on purpose
    KEYCHAIN_BROKER_PROGRAM=$case_dir/stand-in FOO=leaked "$start" $options -- --own-program /opt/kc/bin/security
    pid=$(cat "$pid_file")
    [ -S "$run/socket" ] || { echo "no socket"; return 1; }
    expect "--foreground --socket $run/socket --state $run --pins $case_dir/pins --own-program /opt/kc/bin/security" \
        "$(tr '\n' ' ' < "$run/arguments" | sed 's/ $//')" "the broker's arguments"
    status=$(cat "/proc/$pid/status")
    for field in CapEff CapPrm CapInh CapAmb CapBnd; do
        expect 0000000000080000 "$(awk -v f="$field:" '$1 == f { print $2 }' <<< "$status")" "$field (CAP_SYS_PTRACE only)"
    done
    expect 1 "$(awk '$1 == "NoNewPrivs:" { print $2 }' <<< "$status")" "NoNewPrivs"
    expect "$(id -u "$broker_user")" "$(awk '$1 == "Uid:" { print $2 }' <<< "$status")" "the broker's uid"
    expect "$(id -g "$broker_user")" "$(awk '$1 == "Gid:" { print $2 }' <<< "$status")" "the broker's gid"
    if getent group tss >/dev/null; then
        expect "$(getent group tss | cut -d: -f3)" "$(awk '$1 == "Groups:" { print $2 }' <<< "$status")" "its groups: tss"
    fi
    expect '0 0' "$(awk '/^Max core file size/ { print $5, $6 }' "/proc/$pid/limits")" "the core file limit (soft, hard)"
    expect "$pid" "$(awk '{ sub(/.*\) /, ""); print $4 }' "/proc/$pid/stat")" "its session (its own)"
    said=$(tr '\0' '\n' < "/proc/$pid/environ" | sort | tr '\n' ' ')
    expect 'LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin ' "$said" "its environment"
    expect "755 $broker_user" "$(stat -c '%a %U' "$run")" "the socket's folder"
    expect "700 $broker_user" "$(stat -c '%a %U' "$case_dir/pins")" "the pins folder"
    # shellcheck disable=SC2086
    said=$(KEYCHAIN_BROKER_PROGRAM=$case_dir/stand-in "$start" $options)
    expect "keychain-broker is already running (pid $pid)" "$said"
    said=$("$start" --stop --pid-file "$pid_file")
    expect "keychain-broker stopped (pid $pid)" "$said"
    [ ! -e "$pid_file" ] || { echo "the pid file stayed"; return 1; }
    for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    [ ! -d "/proc/$pid" ] || grep -q '^State:.*Z' "/proc/$pid/status" || { echo "still running"; return 1; }
    # shellcheck disable=SC2086
    status=0; KEYCHAIN_BROKER_PROGRAM=/bin/false "$start" $options 2>/dev/null || status=$?
    expect 1 "$status" "the status when the program exits before it listens"
    [ ! -e "$pid_file" ] || { echo "a pid file for a program that is gone"; return 1; }
}

# KeyringMode=private in the unit (systemd's default for system services): the broker's uid, in a
# session keyring of its own, reaches its persistent keyring (where its state key lives) and keeps
# a key there, with the start script's credentials.
broker_persistent_keyring() {
    command -v keyctl >/dev/null || { echo "keyutils missing"; return 1; }
    useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$broker_user"
    local said
    said=$(setpriv --reuid="$broker_user" --regid="$broker_user" --clear-groups --inh-caps=-all,+sys_ptrace \
        --ambient-caps=+sys_ptrace --bounding-set=-all,+sys_ptrace --no-new-privs keyctl session - sh -c '
            keyring=$(keyctl get_persistent @s) &&
            key=$(keyctl add user state-key 0123456789abcdef0123456789abcdef "$keyring") &&
            keyctl print "$key"; keyctl clear "$keyring"')
    expect 0123456789abcdef0123456789abcdef "$said" "the key, from the persistent keyring"
}

# sudo make install (no DESTDIR) makes the broker's user, in group tss (made if missing). Run in
# a mount namespace over a copy of /etc without keychain-broker or tss, with PREFIX, PAMDIR and
# SYSCTLDIR in the case's folder and a tmpfs over /usr/share (where it writes whatever the prefix)
# and over /run/systemd (no systemd here); the sysctls it applies are put back.
broker_user_by_make_install() {
    local expiry scope etc=$case_dir/etc entry file
    expiry=$(cat /proc/sys/kernel/keys/persistent_keyring_expiry)
    scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || true)
    put_back() {
        echo "$expiry" > /proc/sys/kernel/keys/persistent_keyring_expiry
        [ -z "$scope" ] || echo "$scope" > /proc/sys/kernel/yama/ptrace_scope
    }
    cp -a /etc "$etc"
    for file in passwd shadow group gshadow; do sed -i -e '/^keychain-broker:/d' -e '/^tss:/d' "$etc/$file"; done
    unshare -m bash -c '
        set -e
        mount --make-rprivate /
        mount --bind "$1/etc" /etc
        # Not the machine'"'"'s systemd, if it runs one: nothing is enabled there.
        [ ! -d /run/systemd/system ] || mount -t tmpfs -o size=1m tmpfs /run/systemd
        mount -t tmpfs -o size=1m tmpfs /usr/share
        make -s -C "$2" install PREFIX="$1/prefix" PAMDIR="$1/pam" SYSCTLDIR="$1/sysctl"' \
        install "$case_dir" "$repo" > "$case_dir/make.log" 2>&1 || { put_back; cat "$case_dir/make.log"; return 1; }
    put_back
    entry=$(grep '^keychain-broker:' "$etc/passwd") || { echo "no keychain-broker user"; cat "$case_dir/make.log"; return 1; }
    [ "$(cut -d: -f3 <<< "$entry")" -lt 1000 ] && [ "$(cut -d: -f6 <<< "$entry")" = /nonexistent ] || { echo "$entry"; return 1; }
    grep -q '^keychain-broker:' "$etc/group" || { echo "no group keychain-broker"; return 1; }
    grep -q '^tss:.*[:,]keychain-broker\(,\|$\)' "$etc/group" || { echo "not in tss: $(grep '^tss:' "$etc/group")"; return 1; }
    grep -q 'keychain-broker-start' "$case_dir/make.log" || { echo "no word of keychain-broker-start without systemd"; cat "$case_dir/make.log"; return 1; }
}

# make uninstall DESTDIR=...: none of the broker's files stays (its user is the machine's).
broker_uninstall() {
    cp -a "$stage" "$case_dir/stage"
    make -s -C "$repo" uninstall DESTDIR="$case_dir/stage" >/dev/null
    local left
    left=$(find "$case_dir/stage" -name '*keychain-broker*' -o -name '61-keychain-ptrace.conf')
    expect '' "$left" "the broker's files after make uninstall"
}

# MemoryDenyWriteExecute= in the unit: the staged broker (and the agent, linked the same way) start
# under the kernel's own form of that rule (PR_SET_MDWE, Linux 6.3) as they do without it.
broker_without_write_execute() {
    command -v gcc >/dev/null || { echo "gcc missing"; return 1; }
    cat > "$case_dir/mdwe.c" <<'C'
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    if (prctl(65 /* PR_SET_MDWE */, 1 /* PR_MDWE_REFUSE_EXEC_GAIN */, 0L, 0L, 0L) != 0) { perror("PR_SET_MDWE"); return 125; }
    execv(argv[1], argv + 1);
    perror("execv");
    return 127;
}
C
    gcc -O -o "$case_dir/mdwe" "$case_dir/mdwe.c"
    # The control: the rule is in force (python's mmap of a writable, executable page is refused).
    status=0; "$case_dir/mdwe" /usr/bin/python3 -c 'import mmap; mmap.mmap(-1, 4096, prot=7)' 2>/dev/null || status=$?
    [ "$status" != 0 ] || { echo "PR_SET_MDWE refused nothing"; return 1; }
    local program plain ruled
    for program in "$libexec/keychain-broker" "$ssh_agent -h"; do
        # shellcheck disable=SC2086
        plain=$(cd / && $program 2>&1; echo "status $?")
        # shellcheck disable=SC2086
        ruled=$(cd / && "$case_dir/mdwe" $program 2>&1; echo "status $?")
        expect "$plain" "$ruled" "$program under PR_SET_MDWE"
    done
}

check "make release, then make install DESTDIR=... stages the tools and the PAM module" make_install
check "the staged binaries and module are stripped" stripped
check "the staged tools are static; the module needs no Swift library" self_contained
check "with /opt/swift hidden: security, git and docker helpers work" tools_without_toolchain
check "with /opt/swift hidden: keychain-secret-service serves secret-tool" service_without_toolchain
check "with /opt/swift hidden: pam_keychain.so creates and unlocks the login keychain" module_without_toolchain
check "the SSH agent's units, environment generator and man page are installed and verify" ssh_agent_files
check "the environment generator names the agent's socket only for a user who enabled it" ssh_agent_environment
check "with /opt/swift hidden: keychain-ssh-agent -s/-k/command as ssh-agent, with ssh-add -l" ssh_agent_without_toolchain
check "keychain-ssh-agent accepts and refuses ssh-agent's options as ssh-agent does" ssh_agent_options_as_ssh_agent
check "keychain-ssh-agent --systemd serves a socket-activated descriptor" ssh_agent_socket_activation
check "the broker's program, start script, system units (systemd-analyze verify), sysusers file and ptrace drop-in" broker_files
check "keychain-broker-start: the broker's user and tss, CAP_SYS_PTRACE alone, no new privileges, no core; --stop" broker_start_script
check "with no writable executable memory (MemoryDenyWriteExecute): the staged broker starts as without" broker_without_write_execute
check "a system user in a session keyring of its own (KeyringMode=private) keeps a key in its persistent keyring" broker_persistent_keyring
check "make uninstall DESTDIR=... removes the broker's files" broker_uninstall
check "sudo make install (no DESTDIR, in a copy of /etc) makes the keychain-broker system user in group tss" broker_user_by_make_install

summary
