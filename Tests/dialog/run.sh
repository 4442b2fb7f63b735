#!/usr/bin/env bash
# Issue 55: the broker's question as the person meets it. A program not on an item's list asks
# through the answerers' chain: on a desktop, gcr's system prompter (gcr-prompter, through
# pinentry-gnome3) on a headless X server (Xvfb) and a private session bus, seen (a screenshot)
# and answered (xdotool types the keychain's password), for a program's own read and for
# secret-tool's through keychain-secret-service (the broker's deputy); on GNOME, the desktop
# portal's access dialog (xdg-desktop-portal-gtk's AccessDialog, seen in dbus-monitor, shot and
# answered), then the password in gcr's prompter; without a desktop, pinentry
# (a scripted one, root's copy); and the broker stops asking a program refused three times in a
# minute. The dialog's text is read where the prompter gets it: the properties of its
# PerformPrompt call, seen by dbus-monitor on the private bus (with the bus's errors: the
# service's refusal). KEYCHAIN_DIALOG_SHOTS=DIR keeps the screenshots there.
# Usage: Tests/dialog/run.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/.build/debug}" && pwd)
# shellcheck source=Tests/lib.sh
. "$here/../lib.sh"

if [ "$(id -u)" != 0 ]; then
    echo "skipped: a system user for the broker and a test user need root"
    printf '\n0 passed, 0 failed, 1 skipped\n'
    exit 0
fi
for tool in setpriv keyctl useradd; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run make deps"; printf '\n0 passed, 1 failed\n'; exit 1; }
done

suffix=$$
broker=kcd$suffix user=kcdu$suffix
# Under /run, not /tmp: a program in a folder every user may write to is never identified, nor
# taken as an answerer or a pinentry.
work=$(mktemp -d /run/kc-dialog-XXXXXX)
chmod 755 "$work"
socket=$work/run/socket home=$work/home
keychain=$home/login.keychain-db
broker_pid='' xvfb_pid='' bus_pid='' monitor_pid='' service_pid='' service_job=''
group=tss
getent group tss >/dev/null || group=$broker

stop_broker() {
    [ -n "$broker_pid" ] || return 0
    kill -TERM "$broker_pid" 2>/dev/null
    wait "$broker_pid" 2>/dev/null
    broker_pid=
}

cleanup() {
    stop_broker
    for pid in $service_pid $monitor_pid $bus_pid $xvfb_pid; do kill -TERM "$pid" 2>/dev/null; done
    if id "$broker" >/dev/null 2>&1; then
        keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s "$1")"' - "$(id -u "$broker")" >/dev/null 2>&1
        userdel "$broker" >/dev/null 2>&1
    fi
    if id "$user" >/dev/null 2>&1; then
        # What the session started (gcr-prompter, activated by the bus) goes with the user.
        pkill -KILL -u "$user" 2>/dev/null
        keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s "$1")"' - "$(id -u "$user")" >/dev/null 2>&1
        userdel "$user" >/dev/null 2>&1
    fi
    getent group "$broker" >/dev/null && groupdel "$broker" 2>/dev/null
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

if [ "$group" = tss ]; then
    useradd -r -M -d /nonexistent -s /usr/sbin/nologin -g tss "$broker" || exit 1
else
    useradd -r -M -d /nonexistent -s /usr/sbin/nologin -U "$broker" || exit 1
fi
useradd -M -d "$home" -s /bin/sh "$user" || exit 1
keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s "$1")"' - "$(id -u "$user")" >/dev/null 2>&1
mkdir -p "$home" "$work/bin" "$work/run" "$work/state" "$work/pins" "$work/share/applications"
cp "$build/keychain-broker" "$build/keychain-broker-probe" "$build/keychain-secret-service" "$build/keychain-ssh-agent" "$work/bin/"
# The stand-ins: one that denies and keeps every question, and a scripted pinentry that logs
# what it is told and answers CONFIRM and GETPIN from the files its case writes.
printf '#!/bin/sh\ncat >> %s/asked\nprintf "deny\\n"\n' "$home" > "$work/bin/answer-deny"
cat > "$work/bin/pinentry" <<SCRIPT
#!/bin/sh
echo 'OK Pleased to meet you'
while IFS= read -r line; do
    printf '%s\n' "\$line" >> $home/pinentry.log
    case "\$line" in
        CONFIRM) cat $home/confirm ;;
        GETPIN) cat $home/pin ;;
        *) echo OK ;;
    esac
done
SCRIPT
chmod 755 "$work/bin"/*
# The name the question gives the probe: a .desktop file in the broker's own data folder.
printf '[Desktop Entry]\nType=Application\nName=Probe App\nExec=%s/bin/keychain-broker-probe read\n' "$work" \
    > "$work/share/applications/probe.desktop"
chown "$user:" "$home"
chmod 700 "$home"
chown "$broker:$group" "$work/run" "$work/state" "$work/pins"
chmod 755 "$work/run"
chmod 700 "$work/state" "$work/pins"

# The service's copy is the broker's deputy and one of the keychain's own programs, as
# /usr/bin/keychain-secret-service is on a machine with the package.
start_broker() {
    rm -f "$socket"
    env -i PATH=/usr/bin:/bin XDG_DATA_DIRS="$work/share" \
        setpriv --reuid="$broker" --regid="$group" --clear-groups --inh-caps=-all,+sys_ptrace --ambient-caps=+sys_ptrace \
        --bounding-set=-all,+sys_ptrace --no-new-privs \
        "$work/bin/keychain-broker" --socket "$socket" --state "$work/state" --pins "$work/pins" \
        --deputy "$work/bin/keychain-secret-service" --own-program "$work/bin/keychain-secret-service" --foreground 2>>"$work/broker.log" &
    broker_pid=$!
    local tries=400
    while [ ! -S "$socket" ] && [ $tries -gt 0 ]; do
        kill -0 "$broker_pid" 2>/dev/null || { cat "$work/broker.log"; return 1; }
        sleep 0.05
        tries=$((tries - 1))
    done
    [ -S "$socket" ]
}

# as_user COMMAND...: as the test user, in a keyring session of its own, without a terminal,
# with only the environment given here (and what the caller adds with env).
as_user() {
    setsid -w setpriv --reuid="$user" --regid="$user" --init-groups keyctl session - \
        env -i PATH=/usr/bin:/bin HOME="$home" KEYCHAIN_BROKER_SOCKET="$socket" "$@" </dev/null
}
read_item() { as_user "$@" "$work/bin/keychain-broker-probe" read "$keychain"; }

case_number=0
# shellcheck disable=SC2034 # lib.sh's check writes each case's log beside case_dir
fresh() {
    case_number=$((case_number + 1))
    case_dir=$work/case$case_number
    rm -f "$home/asked" "$home/pinentry.log"
}
# A reader a failed case left waiting on its dialog.
finish() {
    [ -s "$work/reader.pid" ] && kill "$(cat "$work/reader.pid")" 2>/dev/null
    rm -f "$work/reader.pid"
}

start_broker || { echo "the broker did not start"; printf '\n0 passed, 1 failed\n'; exit 1; }
as_user "$work/bin/keychain-broker-probe" create "$keychain" keychain-pass >/dev/null ||
    { echo "cannot create the keychain"; printf '\n0 passed, 1 failed\n'; exit 1; }
as_user "$work/bin/keychain-broker-probe" unlock "$keychain" keychain-pass >/dev/null ||
    { echo "cannot unlock the keychain"; printf '\n0 passed, 1 failed\n'; exit 1; }

# --- Without a desktop: pinentry (KEYCHAIN_PINENTRY, root's copy) -------------------------------

pinentry_asks_with_three_buttons_and_the_password() {
    local out
    echo OK > "$home/confirm"
    printf 'D keychain-pass\nOK\n' > "$home/pin"
    expect "secret: s3cret" "$(read_item KEYCHAIN_PINENTRY="$work/bin/pinentry")"
    cat "$home/pinentry.log"
    grep -q '^SETDESC "Probe App", that is keychain-broker-probe (.*/bin/keychain-broker-probe) ← .* wants to read "probe item" (broker, account probe)' \
        "$home/pinentry.log"
    grep -qx 'SETOK Allow once' "$home/pinentry.log"
    grep -qx 'SETNOTOK Always allow' "$home/pinentry.log"
    grep -qx 'SETCANCEL Deny' "$home/pinentry.log"
    grep -qx 'GETPIN' "$home/pinentry.log"
    # The third button is Always allow: the reader's entry comes back to be written.
    echo 'ERR 83886194 Not confirmed <Pinentry>' > "$home/confirm"
    out=$(read_item KEYCHAIN_PINENTRY="$work/bin/pinentry")
    grep -q "^secret: s3cret; always: " <<< "$out"
    grep -qx "exe:$work/bin/keychain-broker-probe" <<< "$out"
    # A wrong password is asked again, with the broker's word for it.
    printf 'D wrong\nOK\n' > "$home/pin"
    rm -f "$home/pinentry.log"
    out=$(read_item KEYCHAIN_PINENTRY="$work/bin/pinentry") && return 1
    grep -q "status -25293" <<< "$out"
    grep -qx 'SETERROR Wrong password.' "$home/pinentry.log"
}
check "without a desktop, pinentry asks: three buttons, then the keychain's password" pinentry_asks_with_three_buttons_and_the_password

# A pinentry the user could have written is never handed the password: the one in the user's
# home is passed over, and with no other way to ask, nobody is asked.
a_users_pinentry_is_not_taken() {
    local out
    cp "$work/bin/pinentry" "$home/pinentry"
    chown "$user:" "$home/pinentry"
    echo OK > "$home/confirm"
    printf 'D keychain-pass\nOK\n' > "$home/pin"
    out=$(read_item KEYCHAIN_PINENTRY="$home/pinentry") && return 1
    echo "$out"
    [ ! -e "$home/pinentry.log" ]
}
check "a pinentry of the user's own is never asked" a_users_pinentry_is_not_taken

# --- On a desktop: gcr's system prompter, seen and answered ---------------------------------------

desktop_tools=yes
for tool in Xvfb xdotool import dbus-daemon dbus-monitor /usr/libexec/gcr-prompter /usr/bin/pinentry-gnome3; do
    command -v "$tool" >/dev/null || { desktop_tools="missing $tool (packages xvfb xdotool imagemagick dbus-daemon gcr pinentry-gnome3)"; break; }
done

# start_desktop: the user's X server and session bus; DISPLAY and BUS are set.
start_desktop() {
    local tries=200
    setpriv --reuid="$user" --regid="$user" --init-groups env -i PATH=/usr/bin:/bin HOME="$home" \
        Xvfb -displayfd 3 -nolisten tcp -screen 0 1024x768x24 3>"$work/display" 2>"$work/xvfb.log" &
    xvfb_pid=$!
    while [ ! -s "$work/display" ] && [ $tries -gt 0 ]; do sleep 0.05; tries=$((tries - 1)); done
    DISPLAY=:$(head -1 "$work/display")
    [ "$DISPLAY" != : ] || return 1
    # The bus activates gcr-prompter with the bus's own environment: it needs the display.
    setpriv --reuid="$user" --regid="$user" --init-groups env -i PATH=/usr/bin:/bin HOME="$home" DISPLAY="$DISPLAY" \
        dbus-daemon --session --fork --print-address=1 --print-pid=1 > "$work/bus" 2>"$work/bus.log" || return 1
    BUS=$(sed -n 1p "$work/bus")
    bus_pid=$(sed -n 2p "$work/bus")
    setpriv --reuid="$user" --regid="$user" --init-groups env -i PATH=/usr/bin:/bin HOME="$home" DBUS_SESSION_BUS_ADDRESS="$BUS" \
        dbus-monitor --session "interface='org.gnome.keyring.internal.Prompter'" "interface='org.freedesktop.impl.portal.Access'" \
        "type='error'" > "$home/monitor.log" 2>&1 &
    monitor_pid=$!
}

# as_desktop COMMAND...: as the user, in its graphical session.
as_desktop() {
    setpriv --reuid="$user" --regid="$user" --init-groups env -i PATH=/usr/bin:/bin HOME="$home" DISPLAY="$DISPLAY" "$@"
}

# prompts TYPE: how many prompts of TYPE (confirm, password) the prompter has been asked so far.
prompts() { grep -a -A2 'member=PerformPrompt' "$home/monitor.log" | grep -ac "string \"$1\"" || :; }

# wait_for_prompt TYPE N: until the prompter has been asked its Nth prompt of TYPE and its window
# shows; prints the window's id.
wait_for_prompt() {
    local tries=1200
    while [ "$(prompts "$1")" -lt "$2" ] && [ $tries -gt 0 ]; do
        sleep 0.05
        tries=$((tries - 1))
    done
    [ $tries -gt 0 ] || { echo "no $1 prompt" >&2; return 1; }
    # The window: mapped once gcr-prompter has laid it out.
    as_desktop timeout 30 xdotool search --sync --onlyvisible --name '^Keychain access$' | tail -1
}

# give_password N: the keychain's password typed into the prompter's Nth password prompt.
give_password() {
    local window
    window=$(wait_for_prompt password "$1")
    [ -n "$window" ]
    press "$window" type --delay 20 keychain-pass
    as_desktop xdotool key Return
}

# start_reader COMMAND...: COMMAND reads in the user's graphical session, in the background; its
# output in $home/reader.out.
start_reader() {
    as_desktop env KEYCHAIN_BROKER_SOCKET="$socket" DBUS_SESSION_BUS_ADDRESS="$BUS" "$@" > "$home/reader.out" 2>&1 </dev/null &
    echo $! > "$work/reader.pid"
}
start_probe() { start_reader keyctl session - "$work/bin/keychain-broker-probe" read "$keychain"; }
# reader_ends: the reader's exit status, once it has ended; its output shown.
reader_ends() {
    local status=0
    wait "$(cat "$work/reader.pid")" || status=$?
    rm -f "$work/reader.pid"
    cat "$home/reader.out"
    return $status
}

# press WINDOW KEYS...: the pointer over the window (no window manager here: the keyboard
# follows the pointer), then the keys.
press() {
    local window=$1
    shift
    as_desktop xdotool mousemove --window "$window" 60 20
    as_desktop xdotool "$@"
}

# shot NAME WINDOW: the dialog's window as shown, NAME.png in the case's folder (and in
# $KEYCHAIN_DIALOG_SHOTS): a picture of the window's size, not of one colour (a window mapped
# with nothing drawn in it).
shot() {
    local geometry
    mkdir -p "$case_dir"
    as_desktop import -window "$2" png:- > "$case_dir/$1.png"
    geometry=$(as_desktop xdotool getwindowgeometry --shell "$2")
    expect "$(sed -n 's/^WIDTH=//p' <<< "$geometry")x$(sed -n 's/^HEIGHT=//p' <<< "$geometry")" \
        "$(identify -format '%wx%h' "$case_dir/$1.png")" "$1.png's size, the window's"
    identify -format '%[fx:standard_deviation]\n' "$case_dir/$1.png" | awk '{ exit !($1 > 0) }' || { echo "$1.png is of one colour"; return 1; }
    if [ -n "${KEYCHAIN_DIALOG_SHOTS:-}" ]; then mkdir -p "$KEYCHAIN_DIALOG_SHOTS" && cp "$case_dir/$1.png" "$KEYCHAIN_DIALOG_SHOTS/"; fi
}

# asked: the text of the prompter's last PerformPrompt call (its properties: title, description...).
asked() { awk '/member=PerformPrompt/ { text = "" } { text = text $0 "\n" } END { printf "%s", text }' "$home/monitor.log"; }

desktop_asks_and_is_answered() {
    local window out confirms passwords
    confirms=$(prompts confirm) passwords=$(prompts password)
    start_probe
    window=$(wait_for_prompt confirm $((confirms + 1)))
    [ -n "$window" ]
    shot confirm "$window"
    # What the prompter was asked to show: the program (its desktop name, path and parents) and the item.
    grep -a -A1 '"description"' "$home/monitor.log" | tail -1
    grep -aqF 'string ""Probe App", that is keychain-broker-probe ('"$work"'/bin/keychain-broker-probe) ← ' "$home/monitor.log"
    grep -aqF 'wants to read "probe item" (broker, account probe)' "$home/monitor.log"
    grep -aqF 'string "Allow access to a keychain item?"' "$home/monitor.log"
    grep -aqF 'string "Allow"' "$home/monitor.log"
    press "$window" key Return
    # GNOME's pinentry shows two buttons: Always allow is asked apart; Escape there is once.
    window=$(wait_for_prompt confirm $((confirms + 2)))
    [ -n "$window" ]
    shot always "$window"
    grep -aqF 'string "Always allow it?"' "$home/monitor.log"
    press "$window" key Escape
    window=$(wait_for_prompt password $((passwords + 1)))
    [ -n "$window" ]
    shot password "$window"
    press "$window" type --delay 20 keychain-pass
    as_desktop xdotool key Return
    reader_ends
    grep -qx "secret: s3cret" "$home/reader.out"
    out=$(as_user "$work/bin/keychain-broker-probe" log)
    grep -q "^allowed once" <<< "$(tail -1 <<< "$out")"
}

desktop_always() {
    local window confirms passwords
    confirms=$(prompts confirm) passwords=$(prompts password)
    start_probe
    window=$(wait_for_prompt confirm $((confirms + 1)))
    press "$window" key Return
    window=$(wait_for_prompt confirm $((confirms + 2)))
    press "$window" key Return
    give_password $((passwords + 1))
    reader_ends
    grep -q "^secret: s3cret; always: " "$home/reader.out"
    grep -qx "exe:$work/bin/keychain-broker-probe" "$home/reader.out"
}

desktop_deny() {
    local window
    start_probe
    window=$(wait_for_prompt confirm $(($(prompts confirm) + 1)))
    [ -n "$window" ]
    press "$window" key Escape
    reader_ends && return 1
    grep -q "status -25293" "$home/reader.out"
}

# --- On a desktop, through the Secret Service: secret-tool reads the probe's item -----------------

# start_service: keychain-secret-service (root's copy, the broker's deputy) in the user's
# graphical session, as the desktop starts it: its environment has the display and the bus, and
# no answerer of the tests'; the probe's keychain is its default. Its pid in service_pid.
# start_service [OPTION...]: keychain-secret-service, with OPTIONs, on the suite's bus.
start_service() { start_service_on '' "$@"; }
# start_service_on DESKTOP [OPTION...]: the same in a session of XDG_CURRENT_DESKTOP=DESKTOP.
start_service_on() {
    local tries=1200 owner='' desktop=$1
    shift
    as_desktop env KEYCHAIN_BROKER_SOCKET="$socket" DBUS_SESSION_BUS_ADDRESS="$BUS" KEYCHAIN_PATH="$keychain" \
        ${desktop:+XDG_CURRENT_DESKTOP="$desktop"} \
        keyctl session - "$work/bin/keychain-secret-service" "$@" 2>>"$work/service.log" </dev/null &
    service_job=$!
    # Until the name is the service's (a call to it would have the bus start gnome-keyring); its
    # process is keyctl's child.
    until [ -n "$owner" ] && [ "$(readlink "/proc/$owner/exe")" = "$work/bin/keychain-secret-service" ]; do
        [ $((tries -= 1)) -gt 0 ] || return 1
        sleep 0.05
        owner=$(as_desktop env DBUS_SESSION_BUS_ADDRESS="$BUS" dbus-send --session --print-reply --dest=org.freedesktop.DBus \
            /org/freedesktop/DBus org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets 2>/dev/null |
            awk '/uint32/ { print $2 }')
    done
    service_pid=$owner
}

stop_service() {
    [ -n "$service_pid" ] || return 0
    kill -TERM "$service_pid" 2>/dev/null
    # keyctl, its parent, ends with it.
    wait "$service_job" 2>/dev/null
    service_pid=
}

# The item the probe's keychain holds, as the Secret Service shows it (service and account); it
# trusts another program (the probe's create), not secret-tool.
lookup() { start_reader secret-tool lookup service broker account probe; }

# secret-tool is not on the item's list: the broker asks, on the service's display, naming
# secret-tool (not the service) and the Secret Service it asks through; the person allows it in
# the dialog, with the keychain's password, and secret-tool prints the secret.
service_reader_asked_and_answered() {
    local window confirms passwords text
    confirms=$(prompts confirm) passwords=$(prompts password)
    lookup
    window=$(wait_for_prompt confirm $((confirms + 1)))
    [ -n "$window" ]
    shot secret-tool "$window"
    text=$(asked)
    echo "$text"
    grep -qF 'string "Allow access to a keychain item?"' <<< "$text"
    grep -qF 'string "secret-tool (/usr/bin/secret-tool) ← ' <<< "$text"
    grep -qF 'wants to read "probe item" (broker, account probe)' <<< "$text"
    grep -qF 'It asks through the Secret Service (keychain-secret-service), as :' <<< "$text"
    press "$window" key Return
    # Always allow, asked apart: Escape is once.
    window=$(wait_for_prompt confirm $((confirms + 2)))
    [ -n "$window" ]
    press "$window" key Escape
    give_password $((passwords + 1))
    reader_ends
    expect s3cret "$(cat "$home/reader.out")" "what secret-tool printed"
    as_user "$work/bin/keychain-broker-probe" log | tail -1 | grep '^allowed once | probe | .*secret-tool'
}

# Escape in the dialog: the service answers AccessDenied, secret-tool prints no secret.
service_reader_denied() {
    local window text client tries=600
    lookup
    window=$(wait_for_prompt confirm $(($(prompts confirm) + 1)))
    [ -n "$window" ]
    text=$(asked)
    grep -qF 'string "secret-tool (/usr/bin/secret-tool) ← ' <<< "$text"
    # secret-tool's connection, which the question names.
    client=$(grep -ao 'as :[0-9.]* on the session bus' <<< "$text" | cut -d' ' -f2)
    [ -n "$client" ]
    press "$window" key Escape
    reader_ends && return 1
    ! grep -q s3cret "$home/reader.out"
    # secret-tool prints the error's message only; its name is on the bus, seen a moment later.
    until grep -aqF "destination=$client error_name=org.freedesktop.DBus.Error.AccessDenied" <<< "$(asked)"; do
        [ $((tries -= 1)) -gt 0 ] || { asked; return 1; }
        sleep 0.05
    done
    as_user "$work/bin/keychain-broker-probe" log | tail -1 | grep '^denied.* | probe | .*secret-tool'
}

# --- The desktop portal's access dialog, then the password in gcr's prompter ---------------------
# On GNOME (XDG_CURRENT_DESKTOP, in the service's environment as the session gives it), the
# question is the portal's: Debian 12's GNOME names xdg-desktop-portal-gtk for Access, which the
# bus starts. Its dialog has Allow, Deny and "Always allow"; the keychain's password follows in
# gcr's prompter (the portal's dialog has no password field, and the broker needs the password).

# portal_calls: how many AccessDialog calls the portal backend has been asked so far.
portal_calls() { grep -ac 'member=AccessDialog' "$home/monitor.log" || :; }

# wait_for_portal N: until the Nth AccessDialog call and its window shows; prints the window's id.
wait_for_portal() {
    local tries=1200
    while [ "$(portal_calls)" -lt "$1" ] && [ $tries -gt 0 ]; do
        sleep 0.05
        tries=$((tries - 1))
    done
    [ $tries -gt 0 ] || { echo "no AccessDialog call" >&2; return 1; }
    as_desktop timeout 30 xdotool search --sync --onlyvisible --class '^xdg-desktop-portal-gtk$' | tail -1
}

# portal_asked: the last AccessDialog call as dbus-monitor saw it (its handle, texts and options).
portal_asked() { awk '/member=AccessDialog/ { text = "" } { text = text $0 "\n" } END { printf "%s", text }' "$home/monitor.log"; }

# Escape in the portal's dialog: AccessDenied, no secret, and no password asked.
portal_reader_denied() {
    local window text calls passwords
    calls=$(portal_calls) passwords=$(prompts password)
    lookup
    window=$(wait_for_portal $((calls + 1)))
    [ -n "$window" ]
    text=$(portal_asked)
    grep -qF 'string "secret-tool (/usr/bin/secret-tool) ← ' <<< "$text"
    press "$window" key Escape
    reader_ends && return 1
    ! grep -q s3cret "$home/reader.out"
    expect "$passwords" "$(prompts password)" "password prompts"
    as_user "$work/bin/keychain-broker-probe" log | tail -1 | grep '^denied.* | probe | .*secret-tool'
}

# The portal's dialog names secret-tool, the item and the service; "Always allow" ticked and
# Allow; then gcr's prompter asks the password; secret-tool prints the secret, and its next
# read asks nothing.
portal_reader_always_allowed() {
    local window text calls passwords
    calls=$(portal_calls) passwords=$(prompts password)
    lookup
    window=$(wait_for_portal $((calls + 1)))
    [ -n "$window" ]
    shot portal "$window"
    text=$(portal_asked)
    echo "$text"
    grep -qF 'string "Allow access to a keychain item?"' <<< "$text"
    grep -qF 'string "secret-tool (/usr/bin/secret-tool) ← ' <<< "$text"
    grep -qF 'wants to read "probe item" (broker, account probe)' <<< "$text"
    grep -qF 'It asks through the Secret Service (keychain-secret-service), as :' <<< "$text"
    grep -qF 'string "Always allow"' <<< "$text"
    # The check box has the focus: ticked, then Allow (after Deny).
    press "$window" key space
    as_desktop xdotool key Tab Tab Return
    window=$(wait_for_prompt password $((passwords + 1)))
    [ -n "$window" ]
    grep -qF 'Always allow: the keychain' <<< "$(asked)"
    press "$window" type --delay 20 keychain-pass
    as_desktop xdotool key Return
    reader_ends
    expect s3cret "$(cat "$home/reader.out")" "what secret-tool printed"
    as_user "$work/bin/keychain-broker-probe" log | tail -1 | grep '^always allowed | probe | .*secret-tool'
    # Silent now: no dialog of either kind.
    calls=$(portal_calls) passwords=$(prompts password)
    lookup
    reader_ends
    expect s3cret "$(cat "$home/reader.out")" "what secret-tool printed the second time"
    expect "$calls $passwords" "$(portal_calls) $(prompts password)" "dialogs shown for the second read"
}

# The portal backend's name is anyone's to own first (or once its backend is killed): a script of
# the user's that owns it is not handed the question, which goes to gcr's prompter instead (and
# is allowed once there).
portal_backend_of_the_users() {
    local owner confirms passwords window
    owner=$(as_desktop env DBUS_SESSION_BUS_ADDRESS="$BUS" dbus-send --session --print-reply=literal --dest=org.freedesktop.DBus / \
        org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.impl.portal.desktop.gtk 2> /dev/null | awk '{ print $2 }')
    [ -z "$owner" ] || kill "$owner"
    rm -f "$home/caught" "$home/caught.ready"
    cp "$here/portal_squatter.py" "$work/" && chmod 644 "$work/portal_squatter.py"
    as_desktop env DBUS_SESSION_BUS_ADDRESS="$BUS" /usr/bin/python3 "$work/portal_squatter.py" \
        org.freedesktop.impl.portal.desktop.gtk "$home/caught" &
    for _ in $(seq 100); do [ -s "$home/caught.ready" ] && break; sleep 0.1; done
    cat "$home/caught.ready"
    confirms=$(prompts confirm) passwords=$(prompts password)
    lookup
    window=$(wait_for_prompt confirm $((confirms + 1)))
    # The script itself, not the shell that started it: the name is free again for the backend.
    pkill -u "$user" -f portal_squatter.py
    [ -n "$window" ]
    # Allowed once there (not denied: three refusals in a minute would silence the next case).
    press "$window" key Return
    window=$(wait_for_prompt confirm $((confirms + 2)))
    press "$window" key Escape
    give_password $((passwords + 1))
    reader_ends
    expect s3cret "$(cat "$home/reader.out")" "what secret-tool printed"
    cat "$home/caught" 2> /dev/null || :
    if [ -s "$home/caught" ]; then echo "the user's own portal backend was handed the question"; return 1; fi
    grep -F "the desktop portal's access dialog is not used: org.freedesktop.impl.portal.desktop.gtk is owned by /usr/bin/python3" "$work/service.log"
}

# Review 55 (an attack): gcr's system prompter is whoever owns its name on the user's session bus.
# A process of the user that owns it first is handed the broker's real question (the program and
# the item, asked for by a real reader) and would draw the password field the person then types
# the keychain's password into: with that password and the file, every secret. (The package's
# sysctl sets ptrace_scope 1, so the other way docs/security-model.md gives for it, tracing the
# asking process, is closed.) The question must not go to a prompter of the user's.
# squat_prompter: a script of the user's owns gcr's prompter name (gcr-prompter from the cases
# before, if it still runs, killed first: the attacker may, same uid); its pid in squatter, what
# it is asked in $home/caught.
squat_prompter() {
    local owner
    owner=$(as_desktop env DBUS_SESSION_BUS_ADDRESS="$BUS" dbus-send --session --print-reply=literal --dest=org.freedesktop.DBus / \
        org.freedesktop.DBus.GetConnectionUnixProcessID string:org.gnome.keyring.SystemPrompter 2> /dev/null | awk '{ print $2 }')
    [ -z "$owner" ] || kill "$owner"
    rm -f "$home/caught" "$home/caught.ready"
    cp "$here/prompter_squatter.py" "$work/" && chmod 644 "$work/prompter_squatter.py"
    as_desktop env DBUS_SESSION_BUS_ADDRESS="$BUS" /usr/bin/python3 "$work/prompter_squatter.py" "$home/caught" &
    squatter=$!
    for _ in $(seq 100); do [ -s "$home/caught.ready" ] && break; sleep 0.1; done
    cat "$home/caught.ready"
}

desktop_prompter_of_the_users() {
    local squatter
    squat_prompter
    start_probe
    wait "$(cat "$work/probe.pid")" || :
    kill "$squatter"
    cat "$home/caught" 2> /dev/null || :
    if grep -q 'wants to read' "$home/caught" 2> /dev/null; then echo "the user's own prompter was handed the question"; return 1; fi
}

# secret_call METHOD ARGS...: a call to the Secret Service on the suite's bus, as the user.
secret_call() {
    as_desktop env DBUS_SESSION_BUS_ADDRESS="$BUS" dbus-send --session --print-reply --dest=org.freedesktop.secrets "$@"
}

# The same for every pinentry the keychain runs, not only the broker's question: here the Secret
# Service's own prompt for the keychain's password (Unlock of the locked collection, then its
# prompt, through pinentry-gnome3). The script is handed nothing, the prompt is dismissed and the
# collection stays locked.
service_unlock_prompt_not_to_a_squatter() {
    local squatter out locked
    as_user "$work/bin/keychain-broker-probe" lock "$keychain" > /dev/null
    squat_prompter
    start_service --pinentry /usr/bin/pinentry-gnome3
    cp "$here/unlock_prompt.py" "$work/" && chmod 644 "$work/unlock_prompt.py"
    out=$(as_desktop env DBUS_SESSION_BUS_ADDRESS="$BUS" timeout 60 /usr/bin/python3 "$work/unlock_prompt.py")
    locked=$(secret_call /org/freedesktop/secrets/collection/login org.freedesktop.DBus.Properties.Get \
        string:org.freedesktop.Secret.Collection string:Locked | awk '/boolean/ { print $3 }')
    # What the next cases need back first: no squatter, no service, the keychain unlocked.
    kill "$squatter"
    stop_service
    as_user "$work/bin/keychain-broker-probe" unlock "$keychain" keychain-pass > /dev/null
    echo "$out"
    cat "$home/caught" 2> /dev/null || :
    if [ -s "$home/caught" ]; then echo "the user's own prompter was asked for the keychain's password"; return 1; fi
    grep -qx 'completed dismissed=True' <<< "$out"
    expect true "$locked" "the collection, still locked"
    grep -F "the desktop's dialog is not used" "$work/service.log"
}

# The SSH agent's confirmation of a key added with `ssh-add -c`, through pinentry-gnome3: the same
# check. The script is asked nothing, and the signature is refused (nobody could confirm it).
agent_confirmation_not_to_a_squatter() {
    local squatter agent status
    as_desktop env DBUS_SESSION_BUS_ADDRESS="$BUS" KEYCHAIN_PINENTRY=/usr/bin/pinentry-gnome3 \
        "$work/bin/keychain-ssh-agent" -D --session -a "$home/agent.sock" >>"$work/agent.log" 2>&1 &
    agent=$!
    for _ in $(seq 200); do [ -S "$home/agent.sock" ] && break; sleep 0.05; done
    rm -f "$home/id" "$home/id.pub" "$home/data.sig"
    as_desktop ssh-keygen -q -t ed25519 -N '' -f "$home/id"
    as_desktop env SSH_AUTH_SOCK="$home/agent.sock" ssh-add -q -c "$home/id" < /dev/null
    # Only the public half left: ssh-keygen must ask the agent.
    rm -f "$home/id"
    echo data > "$home/data" && chown "$user:" "$home/data"
    squat_prompter
    status=0
    as_desktop env SSH_AUTH_SOCK="$home/agent.sock" timeout 60 ssh-keygen -Y sign -f "$home/id.pub" -n file "$home/data" \
        < /dev/null > /dev/null 2>&1 || status=$?
    kill "$squatter" "$agent"
    wait "$agent" 2> /dev/null || :
    cat "$home/caught" 2> /dev/null || :
    if [ -s "$home/caught" ]; then echo "the user's own prompter was asked to confirm the signature"; return 1; fi
    [ "$status" != 0 ] && [ ! -e "$home/data.sig" ] || { echo "signed without a confirmation"; return 1; }
    grep -F "dialog is not used" "$work/agent.log"
}

if [ "$desktop_tools" != yes ]; then
    skip "the desktop dialog: $desktop_tools"
elif ! start_desktop; then
    cat "$work/xvfb.log" "$work/bus.log" 2>/dev/null
    skip "the desktop dialog: no X server or session bus could start here"
else
    check "on a desktop, gcr's prompter shows the program and the item; Allow, then the password" desktop_asks_and_is_answered
    check "on a desktop, Always allow is asked apart, then the password" desktop_always
    check "on a desktop, Escape is a denial" desktop_deny
    if ! command -v secret-tool >/dev/null; then
        skip "secret-tool through the Secret Service: missing secret-tool (package libsecret-tools)"
    elif ! start_service; then
        cat "$work/service.log"
        fail=$((fail + 1)); echo "FAIL keychain-secret-service did not start on the session bus"
    else
        check "through the Secret Service, gcr's prompter names secret-tool, the item and the service; Allow, then the password" \
            service_reader_asked_and_answered
        check "through the Secret Service, Escape is a denial: AccessDenied, no secret" service_reader_denied
    fi
    stop_service
    if ! command -v secret-tool >/dev/null || [ ! -x /usr/libexec/xdg-desktop-portal-gtk ]; then
        skip "the portal's access dialog: missing secret-tool or /usr/libexec/xdg-desktop-portal-gtk (packages libsecret-tools xdg-desktop-portal-gtk)"
    elif ! start_service_on GNOME; then
        cat "$work/service.log"
        fail=$((fail + 1)); echo "FAIL keychain-secret-service did not start on the session bus"
    else
        check "on GNOME, the portal's access dialog: Escape is a denial, no password asked" portal_reader_denied
        check "on GNOME, a portal backend of the user's own is not handed the question: gcr's prompter asks it" portal_backend_of_the_users
        check "on GNOME, the portal's access dialog names secret-tool and the item; Always allow, then the password in gcr's prompter" \
            portal_reader_always_allowed
    fi
    stop_service
    check "on a desktop, a prompter of the user's own is not handed the question (review 55)" desktop_prompter_of_the_users
    if command -v secret-tool >/dev/null; then
        check "on a desktop, nor the Secret Service's prompt for the keychain's password: dismissed, no secret" service_unlock_prompt_not_to_a_squatter
    fi
    if command -v ssh-keygen >/dev/null && command -v ssh-add >/dev/null; then
        check "on a desktop, nor the SSH agent's confirmation of an ssh-add -c key: refused, nothing signed" agent_confirmation_not_to_a_squatter
    fi
fi

# --- No dialog flood ------------------------------------------------------------------------------

# A fresh broker: the cases above were refused too.
stop_broker
start_broker || echo "the broker did not start again"
as_user "$work/bin/keychain-broker-probe" unlock "$keychain" keychain-pass >/dev/null || echo "cannot unlock the keychain again"

refused_three_times_then_not_asked() {
    local out n
    for n in 1 2 3; do
        out=$(read_item KEYCHAIN_ACCESS_ANSWERER="$work/bin/answer-deny") && return 1
        grep -q "status -25293" <<< "$out"
        expect "$n" "$(grep -c 'wants to read' "$home/asked")" "questions asked"
    done
    out=$(read_item KEYCHAIN_ACCESS_ANSWERER="$work/bin/answer-deny") && return 1
    echo "$out"
    grep -q "status -25293 .*not asked again for a minute" <<< "$out"
    expect 3 "$(grep -c 'wants to read' "$home/asked")" "questions asked"
    out=$(as_user "$work/bin/keychain-broker-probe" log)
    echo "$out"
    grep -q "^denied: asked too often" <<< "$(tail -1 <<< "$out")"
}
check "a program refused three times in a minute is refused without a question" refused_three_times_then_not_asked

summary
