# shellcheck shell=bash
# Switching a KDE desktop: keychain-secret-service enable | disable | status with KWallet there,
# and what --replace and enable say to each provider that keeps org.freedesktop.secrets (kwalletd5
# and KeePassXC, run headless). Sourced by the KDE suite's runner (Tests/kde/run.sh), which
# provides fresh/finish (a case's own HOME and XDG folders, QT_QPA_PLATFORM=offscreen), on_bus
# FUNCTION (the case's own session bus), $bin, check, expect, skip; kde_switch_setup below gives
# each case $SYSTEMD_UNIT_PATH with our unit and $case_dir/system/services holding kwalletd5's
# activation file. Helpers here are named switch_*.
# shellcheck disable=SC2154 # case_dir and bin are the runner's

# The program (its /proc/PID/exe's base name) that owns NAME, or nothing.
switch_owner() {
    local pid
    pid=$(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.GetConnectionUnixProcessID "string:$1" 2>/dev/null | awk '/uint32/ { print $2 }')
    [ -n "$pid" ] && basename "$(readlink "/proc/$pid/exe")"
}

switch_owner_pid() {
    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.GetConnectionUnixProcessID "string:$1" 2>/dev/null | awk '/uint32/ { print $2 }'
}

# switch_wait_owner NAME PROGRAM: until PROGRAM owns NAME (10 s); PROGRAM "" waits for nobody.
switch_wait_owner() {
    local _
    for _ in $(seq 100); do [ "$(switch_owner "$1")" = "$2" ] && return; sleep 0.1; done
    echo "$1 is not provided by ${2:-nobody} (owner: $(switch_owner "$1"))"; return 1
}

# Every file and folder under the user's configuration, data and state: type, mode, link target
# and, for a file, its bytes' digest (disable restores byte for byte).
switch_snapshot() {
    (cd "$HOME" && { find config data state -printf '%p %y %m %l\n' 2>/dev/null || true; } | sort | while read -r path type rest; do
        if [ "$type" = f ]; then echo "$path $type $rest $(sha256sum < "$path" | cut -c1-16)"; else echo "$path $type $rest"; fi
    done)
}

# Whether the service claims KWallet's names (--kwallet: an unknown argument is a usage error).
switch_has_kwallet_flag() { keychain-secret-service --kwallet --help > /dev/null 2>&1; }

# kwalletd5 in this bus, as a KDE login starts it (without pam_kwallet here: no wallet opened).
switch_start_kwalletd() {
    trap switch_reap EXIT
    kwalletd5 >> "$case_dir/kwalletd.log" 2>&1 &
    kwalletd=$!
    switch_wait_owner org.kde.kwalletd5 kwalletd5
}

# KeePassXC with a database opened by --pw-stdin and its Secret Service on, in this bus.
switch_start_keepassxc() {
    trap switch_reap EXIT
    # KeePassXC's one-instance lock is in the temporary folder: this case's own.
    export TMPDIR=$case_dir/tmp
    mkdir -p "$TMPDIR"
    mkdir -p "$XDG_CONFIG_HOME/keepassxc"
    printf '[General]\nConfigVersion=2\n\n[FdoSecrets]\nEnabled=true\nShowNotification=false\n' > "$XDG_CONFIG_HOME/keepassxc/keepassxc.ini"
    printf 'kp-pw\nkp-pw\n' | keepassxc-cli db-create -q -p -t 100 "$case_dir/db.kdbx" > /dev/null
    echo kp-pw | keepassxc --pw-stdin "$case_dir/db.kdbx" >> "$case_dir/keepassxc.log" 2>&1 &
    keepassxc=$!
    switch_wait_owner org.freedesktop.secrets keepassxc || { cat "$case_dir/keepassxc.log"; return 1; }
}

# switch_stop PID: TERM, then KILL after 3 s (KeePassXC headless does not end on TERM).
switch_stop() {
    local _
    [ -n "$1" ] || return 0
    kill "$1" 2>/dev/null || return 0
    for _ in $(seq 30); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# At the end of a case, passed or not: what it started, and a kwalletd the bus started for it
# (neither ends with the bus).
switch_reap() {
    local name
    for name in org.kde.kwalletd5 org.freedesktop.secrets; do
        case "$(switch_owner "$name")" in kwalletd5 | keepassxc) switch_stop "$(switch_owner_pid "$name")" ;; esac
    done
    switch_stop "${kwalletd:-}"
    switch_stop "${keepassxc:-}"
}

# A kwalletrc as KDE's settings leave it (spaces around `=`, the Secret Service on, no newline at
# the end), and pam_kwallet's systemd unit where systemd looks.
switch_kde_user() {
    mkdir -p "$XDG_CONFIG_HOME"
    printf '[Wallet]\nFirst Use=false\nDefault Wallet = kdewallet\n\n[org.freedesktop.secrets]\napiEnabled = true\n\n[Auto Allow]\nkdewallet=Konqueror' \
        > "$XDG_CONFIG_HOME/kwalletrc"
    chmod 600 "$XDG_CONFIG_HOME/kwalletrc"
    printf '[Unit]\nDescription=Unlock kwallet from pam credentials\n\n[Service]\nExecStart=/usr/share/libpam-kwallet-common/pam_kwallet_init\n' \
        > "$SYSTEMD_UNIT_PATH/plasma-kwallet-pam.service"
}

# --- cases (each runs inside its bus) ------------------------------------------------------

switch_enable_and_disable_files() {
    switch_kde_user
    # A wallet, and no kwalletd to read it through.
    mkdir -p "$XDG_DATA_HOME/kwalletd"
    printf 'KWALLET\n\r\0\r\n' > "$XDG_DATA_HOME/kwalletd/kdewallet.kwl"
    cp "$XDG_CONFIG_HOME/kwalletrc" "$case_dir/kwalletrc.before"
    switch_snapshot > "$case_dir/before"
    keychain-secret-service enable > "$case_dir/enable.out" || true
    cat "$case_dir/enable.out"
    grep -q '^KDE: .*; the keychain answers KWallet' "$case_dir/enable.out"
    grep -q "^kwalletd does not run: the wallets in $XDG_DATA_HOME/kwalletd are not imported now" "$case_dir/enable.out"
    local services=$XDG_DATA_HOME/dbus-1/services name
    for name in org.kde.kwalletd5 org.kde.kwalletd6; do
        expect "$(printf '[D-BUS Service]\nName=%s\nExec=%s/keychain-secret-service --kwallet' "$name" "$bin")" "$(cat "$services/$name.service")" \
            "the activation file for $name"
    done
    grep -qx "Exec=$bin/keychain-secret-service --kwallet" "$services/org.freedesktop.secrets.service"
    grep -qx 'Hidden=true' "$XDG_CONFIG_HOME/autostart/pam_kwallet_init.desktop"
    expect /dev/null "$(readlink "$XDG_CONFIG_HOME/systemd/user/plasma-kwallet-pam.service")" "pam_kwallet's unit masked"
    expect "ExecStart=$bin/keychain-secret-service --kwallet" \
        "$(tail -1 "$XDG_CONFIG_HOME/systemd/user/keychain-secret-service.service.d/kwallet.conf")" "our unit's drop-in"
    # kwalletrc: the one line changed, every other byte kept; the wallet itself not disabled.
    expect "$(sed 's/^apiEnabled = true$/apiEnabled=false/' "$case_dir/kwalletrc.before")" "$(cat "$XDG_CONFIG_HOME/kwalletrc")" "kwalletrc"
    ! grep -q '^Enabled *= *false' "$XDG_CONFIG_HOME/kwalletrc"
    expect 600 "$(stat -c %a "$XDG_CONFIG_HOME/kwalletrc")" "kwalletrc's mode"
    # Who answers the names now (the service claims the KWallet names once it has --kwallet).
    if switch_has_kwallet_flag; then
        for name in org.freedesktop.secrets org.kde.kwalletd5 org.kde.kwalletd6; do switch_wait_owner "$name" keychain-secret-service; done
        # As at the next login: a KDE program's first call starts the keychain, not kwalletd.
        switch_stop "$(switch_owner_pid org.kde.kwalletd5)"
        switch_wait_owner org.kde.kwalletd5 ""
        dbus-send --session --print-reply --dest=org.kde.kwalletd5 /modules/kwalletd5 org.kde.KWallet.isEnabled > /dev/null
        expect keychain-secret-service "$(switch_owner org.kde.kwalletd5)" "what a KWallet call started"
    else
        grep -q '^org.freedesktop.secrets is not provided by keychain-secret-service yet' "$case_dir/enable.out"
    fi
    keychain-secret-service status > "$case_dir/status"
    cat "$case_dir/status"
    grep -q '^org.kde.kwalletd5: ' "$case_dir/status"
    grep -q '^org.kde.kwalletd6: ' "$case_dir/status"
    grep -q '^  KDE: yes (' "$case_dir/status"
    grep -qx "  D-Bus activation of org.kde.kwalletd5: $services/org.kde.kwalletd5.service (by enable)" "$case_dir/status"
    grep -qx "  pam_kwallet's autostart: overridden ($XDG_CONFIG_HOME/autostart/pam_kwallet_init.desktop, by enable)" "$case_dir/status"
    grep -qx "  kwalletd's Secret Service: off ($XDG_CONFIG_HOME/kwalletrc, by enable)" "$case_dir/status"
    # A second enable changes nothing; disable restores every file byte for byte.
    switch_snapshot > "$case_dir/enabled"
    keychain-secret-service enable > "$case_dir/enable2.out" || true
    diff "$case_dir/enabled" <(switch_snapshot)
    keychain-secret-service disable > "$case_dir/disable.out"
    cat "$case_dir/disable.out"
    grep -q "^restored $XDG_CONFIG_HOME/kwalletrc as it was before enable" "$case_dir/disable.out"
    cmp "$case_dir/kwalletrc.before" "$XDG_CONFIG_HOME/kwalletrc"
    diff "$case_dir/before" <(switch_snapshot)
    for name in org.freedesktop.secrets org.kde.kwalletd5 org.kde.kwalletd6; do switch_wait_owner "$name" ""; done
    grep -q '^  kwalletd.s Secret Service: on' <<< "$(keychain-secret-service status)"
}

# A kwalletrc that did not exist is removed again; a desktop with no sign of KDE gets no KWallet file.
switch_kwalletrc_made_and_removed() {
    rm -f "$case_dir/system/services/org.kde.kwalletd5.service"
    switch_snapshot > "$case_dir/before"
    keychain-secret-service enable > "$case_dir/enable.out" || true
    ! grep -q '^KDE' "$case_dir/enable.out"
    [ ! -e "$XDG_CONFIG_HOME/kwalletrc" ] && [ ! -e "$XDG_DATA_HOME/dbus-1/services/org.kde.kwalletd5.service" ] ||
        { echo "KWallet's files written on a desktop without KDE"; return 1; }
    grep -q '^  KDE: no' <<< "$(keychain-secret-service status)"
    keychain-secret-service disable > /dev/null
    diff "$case_dir/before" <(switch_snapshot)
    XDG_CURRENT_DESKTOP=KDE keychain-secret-service enable > "$case_dir/enable.out" || true
    cat "$case_dir/enable.out"
    grep -q '^KDE: XDG_CURRENT_DESKTOP is KDE' "$case_dir/enable.out"
    expect "$(printf '[org.freedesktop.secrets]\napiEnabled=false')" "$(cat "$XDG_CONFIG_HOME/kwalletrc")" "the kwalletrc enable made"
    keychain-secret-service disable > "$case_dir/disable.out"
    cat "$case_dir/disable.out"
    grep -q "^removed $XDG_CONFIG_HOME/kwalletrc" "$case_dir/disable.out"
    diff "$case_dir/before" <(switch_snapshot)
}

# A kwalletrc changed since enable (KDE's settings wrote to it) is left as it is, and said; the
# bytes it had before enable stay beside the record.
switch_changed_kwalletrc_is_left() {
    switch_kde_user
    # pam_kwallet5 in a display manager's stack (here in a mount namespace of enable's own): said.
    mkdir -p "$case_dir/pam.d"
    printf '#%%PAM-1.0\nauth include common-auth\n-auth optional pam_kwallet5.so\n-session optional pam_kwallet5.so auto_start\n' \
        > "$case_dir/pam.d/sddm"
    printf 'auth include common-auth\n# session optional pam_kwallet5.so\n' > "$case_dir/pam.d/login"
    # shellcheck disable=SC2016 # $1 is the inner shell's
    unshare -m sh -c 'mount --bind "$1" /etc/pam.d && exec keychain-secret-service enable' - "$case_dir/pam.d" > "$case_dir/enable.out" || true
    cat "$case_dir/enable.out"
    grep -q '^pam_kwallet in /etc/pam.d/sddm still starts a kwalletd at each login, .*: an administrator removes its lines there$' "$case_dir/enable.out"
    printf '\n[Extra]\nmine=1\n' >> "$XDG_CONFIG_HOME/kwalletrc"
    cp "$XDG_CONFIG_HOME/kwalletrc" "$case_dir/kwalletrc.changed"
    keychain-secret-service disable > "$case_dir/disable.out"
    cat "$case_dir/disable.out"
    grep -q "^$XDG_CONFIG_HOME/kwalletrc changed since enable wrote it: left as it is" "$case_dir/disable.out"
    cmp "$case_dir/kwalletrc.changed" "$XDG_CONFIG_HOME/kwalletrc"
    grep -q '^apiEnabled = true$' "$XDG_STATE_HOME/keychain/secret-service-enabled.kwalletrc"
}

# kwalletd5 holds org.kde.kwalletd5 and org.freedesktop.secrets: enable imports, stops it and keeps
# it out; disable gives both names back to it.
switch_hand_over_from_kwalletd() {
    switch_kde_user
    switch_start_kwalletd
    expect kwalletd5 "$(switch_owner org.freedesktop.secrets)" "kwalletd5's Secret Service"
    switch_snapshot > "$case_dir/before"
    keychain-secret-service enable > "$case_dir/enable.out" || true
    cat "$case_dir/enable.out"
    grep -q "^importing the wallets of kwalletd5 (pid $kwalletd) first" "$case_dir/enable.out"
    grep -q "^stopped kwalletd5 (pid $kwalletd), after its wallets were imported" "$case_dir/enable.out"
    switch_stop "$kwalletd"
    if switch_has_kwallet_flag; then
        for name in org.freedesktop.secrets org.kde.kwalletd5 org.kde.kwalletd6; do switch_wait_owner "$name" keychain-secret-service; done
    else
        switch_wait_owner org.kde.kwalletd5 ""
    fi
    keychain-secret-service disable > "$case_dir/disable.out"
    cat "$case_dir/disable.out"
    grep -q '^org.kde.kwalletd5 is provided by kwalletd5 (pid [0-9]*) again' "$case_dir/disable.out"
    # kwalletrc as it was, so kwalletd serves the Secret Service again.
    switch_wait_owner org.freedesktop.secrets kwalletd5
    diff "$case_dir/before" <(switch_snapshot)
    switch_stop "$(switch_owner_pid org.kde.kwalletd5)"
}

# kwalletd writes a change to its file about 5 s after it: enable right after kwallet-query's
# write has kwalletd write it before stopping it, so that after disable kwalletd has every entry
# the keychain took; one it lacks (its file older than the keychain's entries) disable says, and
# fails. And enable starts the service once.
switch_last_write_survives() {
    switch_kde_user
    printf 'login-pw\n' | security create-keychain > /dev/null
    switch_start_kwalletd
    kde pamopen kdewallet login-pw
    kde write kdewallet Passwords early 1 "$(kde qstring placeholder)"
    kde sync kdewallet
    cp "$XDG_DATA_HOME/kwalletd/kdewallet.kwl" "$case_dir/kdewallet.kwl.early"
    # The last writes, given no time: kwallet-query changes an entry, and another is added.
    printf 'query-secret' | kwallet-query -w early -f Passwords kdewallet
    kde write kdewallet Passwords fresh 1 "$(kde qstring fresh-secret)"
    dbus-monitor --session "type='method_call',interface='org.freedesktop.DBus',member='RequestName'" \
        "type='method_call',interface='org.freedesktop.DBus',member='StartServiceByName'" > "$case_dir/requests" 2>&1 &
    monitor=$!
    for _ in $(seq 100); do [ -s "$case_dir/requests" ] && break; sleep 0.1; done
    keychain-secret-service enable > "$case_dir/enable.out" || true
    cat "$case_dir/enable.out"
    grep -q "^stopped kwalletd5 (pid $kwalletd), after its wallets were imported" "$case_dir/enable.out"
    switch_stop "$kwalletd"
    expect fresh-secret "$(security find-generic-password -s Passwords -a fresh -w)" "the last entry, in the keychain"
    for name in org.freedesktop.secrets org.kde.kwalletd5 org.kde.kwalletd6; do switch_wait_owner "$name" keychain-secret-service; done
    kill "$monitor"
    wait "$monitor" 2>/dev/null || true
    # The service takes KWallet's names before the Secret Service's, which enable waits for: then
    # enable starts nothing for them, and no second service finds the names taken.
    expect "org.kde.kwalletd5 org.kde.kwalletd6 org.freedesktop.secrets" \
        "$(grep -A1 'member=RequestName' "$case_dir/requests" | sed -n 's/^ *string "\(.*\)"$/\1/p' | paste -sd ' ')" "the names requested"
    expect 0 "$(grep -A1 'member=StartServiceByName' "$case_dir/requests" | grep -c 'string "org.kde.kwalletd')" "KWallet's names started"
    keychain-secret-service disable > "$case_dir/disable.out"
    cat "$case_dir/disable.out"
    ! grep -q ' lacks ' "$case_dir/disable.out"
    switch_wait_owner org.kde.kwalletd5 kwalletd5
    kde pamopen kdewallet login-pw
    expect query-secret "$(kwallet-query -r early -f Passwords kdewallet)" "kwallet-query's last write, in kwalletd again"
    expect fresh-secret "$(kwallet-query -r fresh -f Passwords kdewallet)" "the last entry, in kwalletd again"
    # A wallet file that lost an entry the keychain took: disable says which, and fails.
    kwalletd=$(switch_owner_pid org.kde.kwalletd5)
    keychain-secret-service enable > "$case_dir/enable.out" || true
    switch_stop "$kwalletd"
    cp "$case_dir/kdewallet.kwl.early" "$XDG_DATA_HOME/kwalletd/kdewallet.kwl"
    local status=0
    keychain-secret-service disable > "$case_dir/disable.out" || status=$?
    cat "$case_dir/disable.out"
    expect 1 "$status" "disable's exit status"
    grep -q "^the wallet .kdewallet. of kwalletd5 (pid [0-9]*) lacks 1 entry that .*login.keychain-db held when enable stopped kwalletd (Passwords/fresh): \`keychain-secret-service export --to org.kde.kwalletd5\` copies them into KWallet$" \
        "$case_dir/disable.out"
    switch_stop "$(switch_owner_pid org.kde.kwalletd5)"
}

# What KDE's own clients store through the keychain after enable stays there, as disable says:
# it is no entry "held when enable stopped kwalletd", even one written in the very second enable
# recorded (disable's check compares the entries' creation dates with that moment). kwalletcli
# (KWallet's library, which wants a $DISPLAY), python-keyring and kwallet-query, before the
# switch, after it and after switching back.
switch_clients_write_after_enable() {
    switch_kde_user
    printf 'login-pw\n' | security create-keychain > /dev/null
    switch_start_kwalletd
    kde pamopen kdewallet login-pw
    local cli=: status=0 second
    if command -v kwalletcli > /dev/null; then cli=switch_kwalletcli; fi
    $cli -f Passwords -e before -p cli-before
    "$py" -c 'import keyring.backends.kwallet as k; k.DBusKeyring().set_password("kr.example", "before", "kr-before")'
    kde sync kdewallet
    keychain-secret-service enable > "$case_dir/enable.out" || true
    grep -q "^stopped kwalletd5 (pid $kwalletd), after its wallets were imported" "$case_dir/enable.out"
    switch_stop "$kwalletd"
    switch_wait_owner org.kde.kwalletd5 keychain-secret-service
    [ "$cli" = : ] || expect cli-before "$($cli -f Passwords -e before)" "kwalletcli's entry, through the keychain"
    expect kr-before "$(kwallet-query -r before -f kr.example kdewallet)" "python-keyring's entry, through the keychain"
    # An entry written at the start of a second, and enable's moment moved into that second: as if
    # enable had stopped kwalletd just before this write.
    second=$("$py" - <<'PY'
import time
import keyring.backends.kwallet as k
ring = k.DBusKeyring()
ring.get_password("kr.example", "warm-up")
while time.time() % 1 > 0.2:
    time.sleep(0.01)
second = int(time.time())
ring.set_password("kr.example", "after", "kr-after")
print(second)
PY
    )
    $cli -f Passwords -e after -p cli-after
    sed -i "s/^kwallet-stopped .*/kwallet-stopped $second/" "$XDG_STATE_HOME/keychain/secret-service-enabled"
    keychain-secret-service disable > "$case_dir/disable.out" || status=$?
    cat "$case_dir/disable.out"
    expect 0 "$status" "disable's exit status"
    ! grep -q ' lacks ' "$case_dir/disable.out"
    grep -q '^what was stored in the keychain since enable stays there' "$case_dir/disable.out"
    switch_wait_owner org.kde.kwalletd5 kwalletd5
    kde pamopen kdewallet login-pw
    [ "$cli" = : ] || expect cli-before "$($cli -f Passwords -e before)" "kwalletcli's entry, in kwalletd again"
    expect kr-before "$("$py" -c 'import keyring.backends.kwallet as k; print(k.DBusKeyring().get_password("kr.example", "before"))')" \
        "python-keyring's entry, in kwalletd again"
    expect kr-after "$(security find-generic-password -s kr.example -a after -w)" "what came after enable, in the keychain"
    switch_stop "$(switch_owner_pid org.kde.kwalletd5)"
}

# kwalletcli refuses to start without $DISPLAY (it was written for X11); Qt draws nothing here.
switch_kwalletcli() { DISPLAY=:0 kwalletcli "$@" 2> /dev/null; }

# --replace and enable say what is true of kwalletd5: it keeps the name, and what frees it.
switch_replace_is_truthful_with_kwalletd() {
    switch_start_kwalletd
    local status=0
    keychain-secret-service --replace 2> "$case_dir/replace.err" || status=$?
    cat "$case_dir/replace.err"
    expect 1 "$status" "--replace's exit status"
    grep -q "^keychain-secret-service: org.freedesktop.secrets is already provided by kwalletd5 (pid $kwalletd); it does not let another program take the name: KWallet's Secret Service goes off with \`\[org.freedesktop.secrets\] apiEnabled=false\` in kwalletrc" \
        "$case_dir/replace.err"
    keychain-secret-service 2> "$case_dir/plain.err" || true
    ! grep -q -- '--replace' "$case_dir/plain.err"
    expect kwalletd5 "$(switch_owner org.freedesktop.secrets)" "the name's owner after --replace"
    switch_stop "$kwalletd"
}

# KeePassXC keeps the name: --replace and enable say so, with the setting to switch off, and
# enable does not try --replace.
switch_replace_is_truthful_with_keepassxc() {
    switch_start_keepassxc
    local status=0 advice="turn off KeePassXC's Secret Service yourself (Tools > Settings > Secret Service Integration)"
    keychain-secret-service --replace 2> "$case_dir/replace.err" || status=$?
    cat "$case_dir/replace.err"
    expect 1 "$status" "--replace's exit status"
    grep -qF "org.freedesktop.secrets is already provided by keepassxc (pid $keepassxc); it does not let another program take the name: $advice" \
        "$case_dir/replace.err"
    status=0
    keychain-secret-service enable --no-import > "$case_dir/enable.out" || status=$?
    cat "$case_dir/enable.out"
    expect 1 "$status" "enable's exit status while KeePassXC keeps the name"
    grep -qF "org.freedesktop.secrets is provided by keepassxc (pid $keepassxc), which does not let another program take the name: $advice" \
        "$case_dir/enable.out"
    ! grep -q 'hand the name over' "$case_dir/enable.out"
    expect keepassxc "$(switch_owner org.freedesktop.secrets)" "the name's owner after enable"
    # The KWallet names are the keychain's all the same (served alone).
    if switch_has_kwallet_flag; then switch_wait_owner org.kde.kwalletd5 keychain-secret-service; fi
    keychain-secret-service disable > /dev/null
    switch_stop "$keepassxc"
}

# Each case as Tests/desktop's are set up (user_case_system: our unit, a "system" D-Bus folder
# after the user's), with kwalletd5's activation file there as on a Debian KDE desktop, and no
# kwalletrc (the cases make the one they need).
kde_switch_setup() {
    user_case_system
    [ ! -f /usr/share/dbus-1/services/org.kde.kwalletd5.service ] ||
        cp /usr/share/dbus-1/services/org.kde.kwalletd5.service "$case_dir/system/services/"
    rm -f "$XDG_CONFIG_HOME/kwalletrc"
    unset XDG_CURRENT_DESKTOP
}

kde_switch_cases() {
    if ! command -v kwalletd5 > /dev/null; then
        skip "kwalletd5 (libkf5wallet-bin) is not installed: the switching cases run against it"
        return
    fi
    check "KDE enable: KWallet's activation files, pam_kwallet kept out, kwalletrc's apiEnabled=false; status; disable byte for byte" \
        on_bus switch_enable_and_disable_files
    check "enable makes a missing kwalletrc and disable removes it; no KWallet file without KDE" on_bus switch_kwalletrc_made_and_removed
    check "enable names a PAM stack with pam_kwallet; disable leaves a kwalletrc changed since, and says so" \
        on_bus switch_changed_kwalletrc_is_left
    check "enable imports and stops kwalletd5; disable gives it org.kde.kwalletd5 and the Secret Service back" on_bus switch_hand_over_from_kwalletd
    check "enable right after a write: kwalletd writes it first, disable finds every entry back (or says which); one start" \
        on_bus switch_last_write_survives
    check "kwalletcli, python-keyring, kwallet-query across enable and disable: what came after enable is no entry kwalletd lacks" \
        on_bus switch_clients_write_after_enable
    check "--replace against kwalletd5 says it keeps the name and what frees it" on_bus switch_replace_is_truthful_with_kwalletd
    if command -v keepassxc > /dev/null && command -v keepassxc-cli > /dev/null; then
        check "--replace and enable against KeePassXC: it keeps the name, its setting named, no --replace tried" \
            on_bus switch_replace_is_truthful_with_keepassxc
    else
        skip "keepassxc is not installed: the KeePassXC case runs it"
    fi
}
