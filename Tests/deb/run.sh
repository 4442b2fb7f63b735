#!/usr/bin/env bash
# The Debian package as a user gets it: `make deb` builds it, `apt-get install ./keychain-for-linux_*.deb`
# installs it, and with /opt/swift hidden the installed man pages, `security`, the git helper and
# pam_keychain.so are used; then `apt-get purge` must leave none of the package's files and the
# user's keychain as it was. Everything runs in a private mount namespace over copies of
# /etc/pam.d, /var/lib/pam and /usr/share/pam-configs, so the maintainer scripts' pam-auth-update
# never touches the machine's own PAM stack, and no other package's pam-auth-update on this machine
# meanwhile finds the profile (its Default is yes); the sysctls the package sets are put back afterwards, and
# the broker's user its postinst makes on this machine is removed unless it was there before.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/../lib.sh"

# namespaced COMMAND...: runs COMMAND where /etc/pam.d, /var/lib/pam and /usr/share/pam-configs
# are copies and /opt/swift is an empty tmpfs.
namespaced() {
    unshare -m bash -c '
        set -e
        mount --make-rprivate /
        mount --bind "$1/pam.d" /etc/pam.d
        mount --bind "$1/var-lib-pam" /var/lib/pam
        mount --bind "$1/pam-configs" /usr/share/pam-configs
        mount -t tmpfs -o size=1m tmpfs /opt/swift
        shift
        exec "$@"' namespaced "$work" "$@"
}

if [ "${1:-}" = --inside ]; then
    work=$2 user=$3
    export PATH=/usr/bin:/bin:/usr/sbin:/sbin
    # The cases run in order and share what they leave in $work (lib.sh runs each in a subshell).
    fresh() { case_dir=$work/case; mkdir -p "$case_dir"; }
    finish() { :; }
    deb_log=$work/deb.log

    builds_the_package() {
        ! /opt/swift/usr/bin/swift --version >/dev/null 2>&1 || { echo "/opt/swift is not hidden"; return 1; }
        # Built by the outer run, before the toolchain was hidden.
        package=$(cat "$work/package"); [ -f "$package" ] || { cat "$work/build.log"; return 1; }
        dpkg-deb -f "$package" Depends | tee "$work/depends"
        for lib in libsqlite3-0 libssl3 libsodium23 libpam0g libsystemd0; do grep -q "$lib" "$work/depends"; done
        lintian --no-tag-display-limit "$package" > "$work/lintian" 2>&1 || true
        ! grep -E '^(E|W): ' "$work/lintian"
    }

    installs_with_apt() {
        package=$(cat "$work/package")
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" > "$deb_log" 2>&1 || { cat "$deb_log"; return 1; }
        dpkg -L keychain-for-linux > "$work/files"
        expect 0 "$(status_of dpkg-query -W keychain-for-linux)"
        # The PAM profile is enabled (a login unlocks the keychain). The sysctl drop-in is in place;
        # whether postinst applies it is Tests/vm's (a running guest does, a chroot must not): where
        # PID 1's root cannot be read (some sandboxes), ischroot takes this mount namespace for one.
        [ -f /usr/share/pam-configs/keychain ]
        pam_stack_names_module
        grep -qx 'kernel.keys.persistent_keyring_expiry = 31536000' /usr/lib/sysctl.d/60-keychain.conf
        grep -qx -- '-kernel.yama.ptrace_scope = 1' /usr/lib/sysctl.d/61-keychain-ptrace.conf
    }

    # The broker: its program, its system units naming it (as systemd reads them), its sysusers
    # file; the user postinst made (a system uid, group tss, no home, no shell); the socket
    # enabled (deb-systemd-helper's link, made without a running systemd too).
    broker_is_installed() {
        [ -x /usr/libexec/keychain-broker ] && [ -x /usr/libexec/keychain-broker-start ]
        grep -qx 'ExecStart=/usr/libexec/keychain-broker --foreground' /usr/lib/systemd/system/keychain-broker.service
        grep -qx 'ListenSequentialPacket=/run/keychain-broker/socket' /usr/lib/systemd/system/keychain-broker.socket
        [ -f /usr/lib/sysusers.d/keychain-broker.conf ]
        local said
        said=$(systemd-analyze --man=no verify /usr/lib/systemd/system/keychain-broker.socket \
            /usr/lib/systemd/system/keychain-broker.service 2>&1) || { echo "$said"; return 1; }
        expect '' "$said" "systemd-analyze verify's complaints"
        local entry uid
        entry=$(getent passwd keychain-broker) || { echo "postinst made no keychain-broker user"; return 1; }
        uid=$(cut -d: -f3 <<< "$entry")
        [ "$uid" -gt 0 ] && [ "$uid" -lt 1000 ] || { echo "not a system uid: $entry"; return 1; }
        expect /nonexistent "$(cut -d: -f6 <<< "$entry")" "its home"
        [[ "$(cut -d: -f7 <<< "$entry")" == */nologin ]] || { echo "a login shell: $entry"; return 1; }
        expect keychain-broker "$(id -gn keychain-broker)" "its group"
        id -nG keychain-broker | tr ' ' '\n' | grep -qx tss || { echo "not in group tss: $(id -nG keychain-broker)"; return 1; }
        # deb-systemd-helper names it by /lib where /lib is /usr/lib.
        expect /usr/lib/systemd/system/keychain-broker.socket \
            "$(readlink -f /etc/systemd/system/sockets.target.wants/keychain-broker.socket)" "the socket's enablement"
    }

    # An image being built (mmdebstrap, debootstrap): the package's postinst run in a chroot of the
    # machine's own /usr and /etc must not set the running kernel's sysctl. A stub sysctl records
    # any call; pam-auth-update is stubbed too (the PAM profile is the cases' around it). That a
    # running system does apply it is Tests/vm's (here, PID 1's root cannot be read, and ischroot
    # takes this mount namespace for a chroot too).
    # The image's own /etc (a copy of this machine's, without keychain-broker) gets the broker's
    # user and the socket's enablement (deb-systemd-helper, stubbed here: it records its calls),
    # through systemd-sysusers, or adduser where that is missing.
    postinst_in_a_chroot_leaves_the_kernel_alone() {
        package=$(cat "$work/package")
        local root=$work/chroot stub=$work/stub d
        dpkg-deb -e "$package" "$work/control"
        # /run as an image has it (adduser takes its lock there).
        mkdir -p "$root/usr" "$root/proc" "$root/dev" "$root/run" "$root/tmp" "$root/out" "$stub" "$work/out"
        for d in bin lib lib64 sbin; do ln -sfn "usr/$d" "$root/$d"; done
        printf '#!/bin/sh\necho "sysctl $*" >> /out/calls\n' > "$stub/sysctl"
        printf '#!/bin/sh\necho "deb-systemd-helper $*" >> /out/calls\n' > "$stub/deb-systemd-helper"
        printf '#!/bin/sh\nexit 0\n' > "$stub/pam-auth-update"
        cp "$work/control/postinst" "$stub/postinst"
        chmod 755 "$stub/sysctl" "$stub/deb-systemd-helper" "$stub/pam-auth-update" "$stub/postinst"
        # in_chroot HIDE [no-tss]: postinst configure in an image whose /etc is a copy of this
        # machine's without keychain-broker (and without group tss); HIDE, a program, absent there.
        in_chroot() {
            local file
            rm -rf "${root:?}/etc" && cp -a /etc "$root/etc"
            for file in passwd shadow group gshadow; do sed -i '/^keychain-broker:/d' "$root/etc/$file"; done
            [ "${2:-}" != no-tss ] || sed -i '/^tss:/d' "$root/etc/group" "$root/etc/gshadow"
            : > "$work/out/calls"
            unshare --mount --fork sh -c '
                set -e
                mount --bind -o ro /usr "$1/usr"
                [ -z "$4" ] || mount --bind /dev/null "$1$4"
                mount -t proc proc "$1/proc"
                mount --bind /dev "$1/dev"
                mount -t tmpfs -o size=1m tmpfs "$1/run"
                mount --bind "$2" "$1/tmp"
                mount --bind "$3" "$1/out"
                chroot "$1" /bin/sh -c "PATH=/tmp:/usr/bin:/usr/sbin:/bin:/sbin sh /tmp/postinst configure"' \
                chroot "$root" "$stub" "$work/out" "$1"
        }
        image_has_the_broker() {
            if grep '^sysctl' "$work/out/calls"; then echo "postinst in a chroot ran sysctl"; return 1; fi
            grep -qx 'deb-systemd-helper enable keychain-broker.socket' "$work/out/calls" || { cat "$work/out/calls"; return 1; }
            local entry
            entry=$(grep '^keychain-broker:' "$root/etc/passwd") || { echo "no keychain-broker in the image"; return 1; }
            [ "$(cut -d: -f3 <<< "$entry")" -lt 1000 ] && [ "$(cut -d: -f6 <<< "$entry")" = /nonexistent ] || { echo "$entry"; return 1; }
            grep -q '^tss:.*[:,]keychain-broker\(,\|$\)' "$root/etc/group" || { echo "not in tss in the image: $(grep '^tss:' "$root/etc/group")"; return 1; }
        }
        in_chroot ''
        image_has_the_broker
        # Without systemd-sysusers (/dev/null over it: sh's command -v finds no program there):
        # adduser's way, which makes group tss too where the image has none.
        in_chroot "$(command -v systemd-sysusers)"
        image_has_the_broker
        in_chroot "$(command -v systemd-sysusers)" no-tss
        image_has_the_broker
        in_chroot '' no-tss
        image_has_the_broker
    }

    # A running system where the administrator masked the ptrace drop-in
    # (`ln -s /dev/null /etc/sysctl.d/61-keychain-ptrace.conf`): postinst (an upgrade's) applies
    # the files in force, the mask for that one. Run on this machine's root in a mount namespace
    # over a copy of /etc/sysctl.d, with stubs for what would change anything (they record calls);
    # ischroot's stub says "not a chroot" where PID 1's root cannot be read.
    postinst_keeps_a_masked_sysctl() {
        package=$(cat "$work/package")
        local stub=$work/stub-running tool
        dpkg-deb -e "$package" "$work/control-running"
        mkdir -p "$stub" && : > "$work/running-calls"
        for tool in sysctl systemd-sysusers deb-systemd-helper deb-systemd-invoke systemctl pam-auth-update; do
            printf '#!/bin/sh\necho "%s $*" >> "%s"\n' "$tool" "$work/running-calls" > "$stub/$tool"
        done
        printf '#!/bin/sh\nexit 1\n' > "$stub/ischroot"
        chmod 755 "$stub"/*
        cp -a /etc/sysctl.d "$work/sysctl.d"
        ln -sfn /dev/null "$work/sysctl.d/61-keychain-ptrace.conf"
        unshare --mount --fork sh -c '
            set -e
            mount --bind "$1/sysctl.d" /etc/sysctl.d
            PATH=$2:/usr/bin:/usr/sbin:/bin:/sbin sh "$1/control-running/postinst" configure 0.1' \
            postinst "$work" "$stub"
        grep '^sysctl' "$work/running-calls" > "$work/sysctl-calls" || true
        expect "sysctl -q -p /usr/lib/sysctl.d/60-keychain.conf
sysctl -q -p /etc/sysctl.d/61-keychain-ptrace.conf" "$(cat "$work/sysctl-calls")" "the files postinst applied"
    }

    # The login stack pam-auth-update wrote: the module after pam_unix in auth, session and password.
    pam_stack_names_module() {
        local file
        for file in common-auth common-session common-password; do
            grep -q '^[^#].*pam_keychain\.so' "/etc/pam.d/$file" || { echo "/etc/pam.d/$file does not name pam_keychain.so"; return 1; }
        done
        if grep -q pam_keychain /etc/pam.d/common-session-noninteractive; then
            echo "common-session-noninteractive names pam_keychain.so"; return 1
        fi
    }

    pam_stack_is_clean() {
        if grep -l pam_keychain /etc/pam.d/common-*; then echo "still named after the package went"; return 1; fi
    }

    man_pages_are_found() {
        for page in security git-credential-keychain docker-credential-keychain keychain-secret-service '8 pam_keychain' '8 keychain-broker' '7 keychain'; do
            found=$(man -w $page) || { echo "man -w $page found nothing"; return 1; }
            [[ "$found" == /usr/share/man/* ]] || { echo "man -w $page: $found"; return 1; }
        done
        # Every subcommand of the tool is in its page.
        text=$(man -P cat security 2>/dev/null)
        for sub in $(security help 2>&1 | awk '/^SUBCOMMANDS:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'); do
            [[ "$text" == *"$sub"* ]] || { echo "security(1) lacks $sub"; return 1; }
        done
    }

    security_round_trip() {
        export HOME=$work/home XDG_DATA_HOME=$work/home/data
        mkdir -p "$HOME"
        printf 'deb-pass\n' | /usr/bin/security create-keychain
        printf 'deb secret\n' | /usr/bin/security add-generic-password -a alice -s deb-test -w
        expect 'deb secret' "$(/usr/bin/security find-generic-password -a alice -s deb-test -w)"
        [[ "$(/usr/bin/security --generate-completion-script bash)" == *find-generic-password* ]]
        [ -f /usr/share/bash-completion/completions/security ] && [ -f /usr/share/zsh/vendor-completions/_security ] &&
            [ -f /usr/share/fish/vendor_completions.d/security.fish ]
    }

    git_round_trip() {
        export HOME=$work/home XDG_DATA_HOME=$work/home/data GIT_CONFIG_NOSYSTEM=1
        git config --global credential.helper keychain
        printf 'protocol=https\nhost=deb.example.org\nusername=bob\npassword=git-deb-secret\n\n' | git credential approve
        out=$(printf 'protocol=https\nhost=deb.example.org\n\n' | GIT_TERMINAL_PROMPT=0 git credential fill)
        expect git-deb-secret "$(echo "$out" | sed -n 's/^password=//p')" "git's password through /usr/bin/git-credential-keychain"
        expect git-deb-secret "$(/usr/bin/security find-internet-password -s deb.example.org -w)"
    }

    secret_service_is_activated() {
        # The installed activation file as a session bus reads it; alone in the bus's service
        # folder, since gnome-keyring's may sit beside it in /usr/share/dbus-1/services.
        export HOME=$work/home XDG_DATA_HOME=$work/home/data
        local services=$work/dbus-services
        mkdir -p "$services"
        cp /usr/share/dbus-1/services/org.keychain-linux.secrets.service "$services/"
        sed "s|@SERVICES@|$services|" "$repo/Tests/secret-service/session.conf" > "$work/session.conf"
        out=$(timeout 60 dbus-run-session --config-file="$work/session.conf" -- sh -c '
            printf deb-ss-secret | secret-tool store --label=deb service deb-secret-service account deb &&
            secret-tool lookup service deb-secret-service && echo &&
            pgrep -f "^/usr/bin/keychain-secret-service" >/dev/null && echo served-by-the-installed-service' \
            2> >(grep -v -e 'Failed to set fd limit' -e 'Activating service' -e 'Successfully activated' >&2)) || true
        expect "deb-ss-secret
served-by-the-installed-service" "$out" "secret-tool through the installed keychain-secret-service"
        expect deb-ss-secret "$(/usr/bin/security find-generic-password -s deb-secret-service -a deb -w)" "the item, through security"
        # The systemd user unit the activation file names, as systemd reads it.
        grep -qx 'SystemdService=keychain-secret-service.service' "$services/org.keychain-linux.secrets.service"
        mkdir -p "$work/runtime" && chmod 700 "$work/runtime"
        XDG_RUNTIME_DIR=$work/runtime systemd-analyze --user verify /usr/lib/systemd/user/keychain-secret-service.service
        # Sync's user units (`security sync`), as systemd reads them.
        XDG_RUNTIME_DIR=$work/runtime systemd-analyze --user verify /usr/lib/systemd/user/keychain-sync.service \
            /usr/lib/systemd/user/keychain-sync.timer /usr/lib/systemd/user/keychain-sync.path
        # The polkit action, where polkitd reads actions.
        [ -f /usr/share/polkit-1/actions/org.keychain-linux.user-presence.policy ]
        # The portal backend, where xdg-desktop-portal reads portals, naming the service's bus name.
        grep -qx 'DBusName=org.freedesktop.secrets' /usr/share/xdg-desktop-portal/portals/keychain.portal
        grep -qx 'Interfaces=org.freedesktop.impl.portal.Secret' /usr/share/xdg-desktop-portal/portals/keychain.portal
    }

    pam_login() {
        local password='Deb-login-7'
        useradd -m -s /bin/sh "$user"
        echo "$user:$password" | chpasswd
        cat > /etc/pam.d/keychain-deb-test <<PAM
    auth     required  pam_unix.so
    auth     optional  pam_keychain.so
    account  required  pam_unix.so
    session  required  pam_unix.so
    session  optional  pam_keychain.so auto_create
PAM
        printf '%s\n' "$password" | pamtester keychain-deb-test "$user" authenticate open_session >/dev/null
        home=$(getent passwd "$user" | cut -d: -f6)
        keychain=$home/.local/share/keychains/login.keychain-db
        [ -f "$keychain" ] || { echo "no keychain was created at login"; return 1; }
        state=$(setpriv --reuid="$user" --regid="$user" --init-groups env -i HOME="$home" /usr/bin/security status |
            awk '$1 == "WhenUnlocked:" { print $2 }')
        expect unlocked "$state" "WhenUnlocked after a login through the installed module"
        sha256sum "$keychain" > "$work/keychain.sum"
    }

    upgrades_in_place() {
        # The same package under a higher version, as the next release would come.
        package=$(cat "$work/package")
        version=$(dpkg-deb -f "$package" Version)
        rm -rf "$work/next" && dpkg-deb -R "$package" "$work/next"
        sed -i "s/^Version: .*/Version: $version.1/" "$work/next/DEBIAN/control"
        dpkg-deb --root-owner-group -b "$work/next" "$work/next.deb" >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$work/next.deb" > "$deb_log" 2>&1 || { cat "$deb_log"; return 1; }
        expect "$version.1" "$(dpkg-query -W -f='${Version}' keychain-for-linux)" "the upgraded version"
        pam_stack_names_module
        sha256sum -c --quiet "$work/keychain.sum"
        expect 'deb secret' "$(HOME=$work/home XDG_DATA_HOME=$work/home/data /usr/bin/security find-generic-password -a alice -s deb-test -w)"
        dpkg -L keychain-for-linux > "$work/files"
    }

    purge_leaves_nothing() {
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq keychain-for-linux > "$deb_log" 2>&1 || { cat "$deb_log"; return 1; }
        ! dpkg-query -W -f='${Status}' keychain-for-linux 2>/dev/null | grep -q installed
        pam_stack_is_clean
        left=0
        while read -r path; do
            if [ -f "$path" ] || [ -L "$path" ]; then echo "left behind: $path"; left=1; fi
        done < "$work/files"
        [ "$left" = 0 ]
        # The user's keychain is the user's: untouched, and still opens.
        sha256sum -c --quiet "$work/keychain.sum"
        # The socket's enablement goes with the package; the broker's user stays (Debian's way:
        # a file it owned may remain).
        [ ! -L /etc/systemd/system/sockets.target.wants/keychain-broker.socket ] || { echo "the socket is still enabled"; return 1; }
        [ ! -e /etc/systemd/system/keychain-broker.socket ] || { echo "the socket is left masked"; return 1; }
        getent passwd keychain-broker >/dev/null || { echo "purge removed the keychain-broker user"; return 1; }
    }

    check "make deb: the package, its Depends from what it links, lintian clean" builds_the_package
    check "apt-get install ./keychain-for-linux_*.deb (PAM profile enabled in common-auth/-session/-password; the sysctl drop-in)" installs_with_apt
    check "postinst in a chroot (an image being built) applies no sysctl to the running kernel; the image gets the broker's user (sysusers, adduser) and its socket enabled" postinst_in_a_chroot_leaves_the_kernel_alone
    check "postinst on a running system applies the sysctl files in force: an administrator's mask of the ptrace drop-in wins" postinst_keeps_a_masked_sysctl
    check "the broker: its program, system units (systemd-analyze verify), sysusers file; postinst's keychain-broker user in tss; its socket enabled" broker_is_installed
    check "with /opt/swift hidden: man -w finds every page; security(1) has every subcommand" man_pages_are_found
    check "with /opt/swift hidden: /usr/bin/security creates a keychain, adds and finds" security_round_trip
    check "with /opt/swift hidden: a git credential round trip through the installed helper" git_round_trip
    check "with /opt/swift hidden: the session bus starts the installed Secret Service; its unit verifies; the polkit action and portal file are in place" secret_service_is_activated
    check "with /opt/swift hidden: a PAM login through the installed pam_keychain.so" pam_login
    check "an upgrade to a higher version keeps the files, the users' keychains, and the profile enabled" upgrades_in_place
    check "apt-get purge leaves no file of the package, no pam_keychain in /etc/pam.d, the socket not enabled; the user's keychain and the broker's user stay" purge_leaves_nothing

    summary
    exit
fi

if [ "$(id -u)" != 0 ]; then
    skip "installing a package, a test user and a mount namespace need root"
    summary
    exit 0
fi
if dpkg-query -W -f='${Status}' keychain-for-linux 2>/dev/null | grep -q 'install ok installed'; then
    skip "keychain-for-linux is installed on this machine; the test installs and purges its own"
    summary
    exit 0
fi

work=$(mktemp -d /tmp/kc-deb-XXXXXX)
chmod 755 "$work"
user=kcdeb$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
expiry=$(cat /proc/sys/kernel/keys/persistent_keyring_expiry)
ptrace_scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || true)
# The package's postinst makes the broker's user on this machine; purge keeps it (Debian's way).
broker_user_was_here=false
if getent passwd keychain-broker >/dev/null; then broker_user_was_here=true; fi
cleanup() {
    if dpkg-query -W -f='${Status}' keychain-for-linux 2>/dev/null | grep -q 'ok installed'; then
        namespaced env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq keychain-for-linux >/dev/null 2>&1
    fi
    if ! $broker_user_was_here; then
        userdel keychain-broker >/dev/null 2>&1
        groupdel keychain-broker >/dev/null 2>&1
    fi
    [ -z "$ptrace_scope" ] || echo "$ptrace_scope" > /proc/sys/kernel/yama/ptrace_scope
    if id "$user" >/dev/null 2>&1; then
        setpriv --reuid="$user" --regid="$user" --init-groups keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1
        pkill -KILL -u "$user" 2>/dev/null
        userdel -r "$user" >/dev/null 2>&1
    fi
    echo "$expiry" > /proc/sys/kernel/keys/persistent_keyring_expiry
    rm -rf "$work"
}
trap cleanup EXIT
exec 9>/tmp/kc-pam.lock
flock 9

# Built with the toolchain, before it is hidden: `make release`, whose products build.sh stages with
# `make install` (which builds nothing itself).
{ make -s -C "$repo" release >&2 && bash "$repo/packaging/deb/build.sh" "$work"; } > "$work/package" 2> "$work/build.log" ||
    tail -20 "$work/build.log"
tail -1 "$work/package" > "$work/package.path" && mv "$work/package.path" "$work/package"
cp -a /etc/pam.d "$work/pam.d"
mkdir -p /var/lib/pam && cp -a /var/lib/pam "$work/var-lib-pam"
cp -a /usr/share/pam-configs "$work/pam-configs"
namespaced bash "$0" --inside "$work" "$user"
