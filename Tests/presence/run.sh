#!/usr/bin/env bash
# User presence through a real polkit: a private system bus and Debian's polkitd in a mount
# namespace of their own (a tmpfs over /run/dbus, the project's action beside the machine's own in
# a copy of /usr/share/polkit-1/actions), a throwaway user whose own password answers, and the
# tests' agents (pkttyagent, which `security` starts on its terminal; agent.py for dismissing and
# for never answering). The machine's own bus, polkit and PAM stack are not touched.
# Usage: Tests/presence/run.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/.build/debug}" && pwd)

if [ "$(id -u)" != 0 ]; then
    echo "skipped: a private system bus, polkitd and a test user need root"
    printf '\n0 passed, 0 failed, 1 skipped\n'
    exit 0
fi
for tool in /usr/lib/polkit-1/polkitd /usr/bin/pkcheck /usr/bin/pkttyagent /usr/lib/polkit-1/polkit-agent-helper-1 dbus-daemon setpriv unshare; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run make deps"; printf '\n0 passed, 1 failed\n'; exit 1; }
done

user=kcpres$$ password="Presence-$RANDOM-pass"
work=$(mktemp -d /tmp/kc-presence-XXXXXX)
chmod 755 "$work"
cleanup() {
    [ -f "$work/polkitd.pid" ] && kill "$(cat "$work/polkitd.pid")" 2>/dev/null
    [ -f "$work/dbus.pid" ] && kill "$(cat "$work/dbus.pid")" 2>/dev/null
    if id "$user" >/dev/null 2>&1; then
        setpriv --reuid="$user" --regid="$user" --init-groups keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1
        pkill -KILL -u "$user" 2>/dev/null
        userdel "$user" >/dev/null 2>&1
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# The user and what it runs (the build folder may be in a folder only root can read).
exec 9>/tmp/kc-pam.lock
flock 9
useradd -M -d "$work/home" -s /bin/sh "$user"
printf '%s:%s\n' "$user" "$password" | chpasswd
mkdir -p "$work/home" "$work/bin"
cp "$build/security" "$build/git-credential-keychain" "$build/keychain-presence-probe" "$here/agent.py" "$work/bin/"
chown -R "$user:" "$work/home"
chmod 700 "$work/home"
keychain=$work/home/presence.keychain-db
printf 'keychain-pass\n' | setpriv --reuid="$user" --regid="$user" --init-groups env HOME="$work/home" \
    "$work/bin/security" create-keychain "$keychain" >/dev/null || { echo "cannot create the keychain"; exit 1; }

mkdir "$work/actions"
cp /usr/share/polkit-1/actions/*.policy "$work/actions/" 2>/dev/null
cp "$repo/polkit/org.keychain-linux.user-presence.policy" "$work/actions/"

unshare -m bash -c '
    set -e
    . "$1"
    private_polkit "$2" || true
    shift 2
    exec /usr/bin/python3 "$@"
' presence "$here/../lib.sh" "$work" "$here/drive.py" "$work/bin" "$keychain" "$user" "$password" "$work" | tee "$work/results"
status=${PIPESTATUS[0]}
passed=$(grep -c '^ok - ' "$work/results")
failed=$(grep -c '^not ok - ' "$work/results")
[ "$status" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
echo
echo "$passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
