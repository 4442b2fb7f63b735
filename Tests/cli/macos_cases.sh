# shellcheck shell=bash
# shellcheck disable=SC2154 # security, pki, case_dir and here are set by run.sh, which sources this file
# `! command` does not stop a `set -e` case; `refute command` does.
refute() { if "$@"; then return 1; fi; }

# Cases written from Apple's SecurityTool sources (apple-oss-distributions/Security,
# SecurityTool/macOS/): each names the file whose behaviour it checks. Sourced by run.sh, which
# provides $security, fresh/finish, make_keychain and $pki.

# keychain_list.c (keychain_list, keychain_default, keychain_login, parse_domain);
# keychain_utilities.c (keychain_create_array: keychains named are searched in order).
search_list_and_domains() {
    make_keychain login pw
    make_keychain work pw
    login=$XDG_DATA_HOME/keychains/login.keychain-db work=$XDG_DATA_HOME/keychains/work.keychain-db
    # create-keychain adds to the search list: "Create keychains and add them to the search list."
    expect "$(printf '    "%s"\n    "%s"' "$login" "$work")" "$("$security" list-keychains)"
    "$security" add-generic-password -a a -s only-work -w from-work work
    "$security" add-generic-password -a a -s both -w from-login login
    "$security" add-generic-password -a a -s both -w from-work work
    expect from-work "$("$security" find-generic-password -s only-work -w)" "searched through the list"
    expect from-login "$("$security" find-generic-password -s both -w)" "the list's order"
    expect from-work "$("$security" find-generic-password -s both -w work login)" "keychains named are searched in order"
    expect from-login "$("$security" find-generic-password -s both -w login work)"
    # -s sets the list (in order); the user domain by any prefix of its name, as parse_domain.
    "$security" list-keychains -d user -s work login
    expect from-work "$("$security" find-generic-password -s both -w)"
    "$security" list-keychains -d u -s work
    expect "    \"$work\"" "$("$security" list-keychains -d user)"
    "$security" add-generic-password -a a -s only-login -w x login
    expect 44 "$(status_of "$security" find-generic-password -s only-login)" "a keychain off the list is not searched"
    expect x "$("$security" find-generic-password -s only-login -w login)" "but a named one is"
    expect 2 "$("$security" dump-keychain | grep -c '^class: "genp"')" "dump-keychain: the list's keychains (work's two)"
    # System, common and dynamic domains hold no keychains on Linux: empty lists, not errors.
    expect "" "$("$security" list-keychains -d system)"
    expect "" "$("$security" list-keychains -d dynamic)"
    expect 2 "$(status_of "$security" list-keychains -d nowhere)" "Invalid domain: usage"
    grep -q 'Invalid domain: nowhere' <<< "$("$security" list-keychains -d nowhere 2>&1)"
    expect 2 "$(status_of "$security" list-keychains "$work")" "operands without -s: usage"
    expect 1 "$(status_of "$security" list-keychains -d system -s "$work")" "only the user's list can be set"
    expect 1 "$(status_of "$security" default-keychain -d system)"
    # default-keychain -d user -s; login-keychain shows the login keychain, cannot be set (returns 1).
    "$security" default-keychain -d user -s work
    expect "    \"$work\"" "$("$security" default-keychain -d user)"
    expect "    \"$login\"" "$("$security" login-keychain)"
    expect 1 "$(status_of "$security" login-keychain -s work)"
    # delete-keychain: "Delete keychains and remove them from the search list."
    "$security" delete-keychain work
    expect "" "$("$security" list-keychains)"
    "$security" list-keychains -s login
    "$security" list-keychains -s
    expect "" "$("$security" list-keychains)" "-s with no keychain: an empty list"
}

# keychain_find.c: keychain_set_key_partition_list and its siblings, keychain_set_partition_list.
# The partition list is the item's access list here: -S replaces it.
partition_lists() {
    make_keychain login kcpass
    "$security" import "$pki/alice.p12" -P p12pass >/dev/null 2>&1
    # macOS's CI line, verbatim: -s matches keys that can sign.
    out=$("$security" set-key-partition-list -S apple-tool:,apple: -s -k kcpass 2>/dev/null)
    grep -qx 'class: 0x00000010 ' <<< "$out" || { echo "the private key is listed, as macOS lists each key"; return 1; }
    grep -A2 -x 'class: 0x00000010 ' <<< "$("$security" dump-keychain -a)" > /dev/null
    keys=$("$security" dump-keychain -a | awk '/^class: 0x00000010 /{k=1} k && /^access:/{print; getline; print; getline; print; exit}')
    expect $'access: 2 entries\n    entry 0: apple-tool:\n    entry 1: apple:' "$keys" "the key's list: the partition ids"
    before=$("$security" dump-keychain -a)
    expect 1 "$(status_of "$security" set-key-partition-list -S apple-tool: -D no-such-kind -k kcpass "$XDG_DATA_HOME/keychains/login.keychain-db")" "no key matches: 1"
    expect 0 "$(status_of "$security" set-key-partition-list -S apple-tool:,apple: -t private -k kcpass)"
    KEYCHAIN_PATH_CI=$XDG_DATA_HOME/keychains/login.keychain-db
    "$security" set-key-partition-list -S apple-tool:,apple: -s -k kcpass "$KEYCHAIN_PATH_CI" > /dev/null
    # A wrong password: SecKeychainUnlock's error (errSecAuthFailed) and status 1
    # (keychain_set_partition_list sets result = 1 for every failure); nothing changes.
    expect 1 "$(status_of "$security" set-key-partition-list -S any -k wrong)"
    grep -q 'SecKeychainUnlock: .*(errSecAuthFailed)' <<< "$("$security" set-key-partition-list -S any -k wrong 2>&1 >/dev/null)"
    expect 2 "$(status_of "$security" set-key-partition-list -k kcpass)" "no -S: usage"
    expect 2 "$(status_of "$security" set-key-partition-list -S x -t sideways -k kcpass)" "-t: symmetric, public or private"
    # An id no version knows: refused (errSecParam), never stored as a list that trusts nobody.
    expect 206 "$(status_of "$security" set-key-partition-list -S apple-tool:,bogus -k kcpass)"
    grep -q 'unknown partition id "bogus"' <<< "$("$security" set-key-partition-list -S apple-tool:,bogus -k kcpass 2>&1)"
    expect "$before" "$("$security" dump-keychain -a)" "nothing changed by the refusals"
    # -k last, or none: prompted for (read from standard input here).
    printf 'kcpass\n' | "$security" set-key-partition-list -S apple-tool: -k >/dev/null
    printf 'wrong\n' | refute "$security" set-key-partition-list -S apple-tool: >/dev/null 2>&1
    # Passwords: no match is SecItemCopyMatching's errSecItemNotFound, status 1.
    expect 1 "$(status_of "$security" set-generic-password-partition-list -S apple: -a a -s s -k kcpass)"
    "$security" add-generic-password -a a -s s -w x
    "$security" add-internet-password -a a -s h.example -w x
    grep -qx 'class: "genp"' <<< "$("$security" set-generic-password-partition-list -S apple-tool:,apple: -a a -s s -k kcpass)"
    expect $'access: 2 entries\n    entry 0: apple-tool:\n    entry 1: apple:' "$("$security" access -a a -s s | sed -n '/^access:/,$p')"
    # Linux's own forms and Apple's team ids are kept as given.
    "$security" set-internet-password-partition-list -S 'exe:/usr/bin/git,flatpak:org.example.App,snap:app,teamid:ABCDE12345' -a a -s h.example -k kcpass > /dev/null
    expect $'access: 4 entries\n    entry 0: exe:/usr/bin/git\n    entry 1: flatpak:org.example.App\n    entry 2: snap:app\n    entry 3: teamid:ABCDE12345' \
        "$("$security" access --internet -a a -s h.example | sed -n '/^access:/,$p')"
    "$security" set-generic-password-partition-list -S "" -a a -s s -k kcpass > /dev/null
    expect "access: 0 entries" "$("$security" access -a a -s s | sed -n '/^access:/,$p')" '-S "": nobody trusted'
    expect x "$("$security" find-generic-password -a a -s s -w)" "the secret is untouched"
    # A locked keychain: -k unlocks it, as SecKeychainUnlock does.
    "$security" lock-keychain
    "$security" set-generic-password-partition-list -S apple: -a a -s s -k kcpass > /dev/null
}

# BSD getopt(3) as every command calls it; keychain_add.c (-p as legacy -w, -w last prompts).
getopt_compatible_parsing() {
    make_keychain login -kcpw-
    "$security" lock-keychain
    "$security" unlock-keychain -p -kcpw-           # a value starting with "-" is a value
    "$security" add-generic-password -a a -s s -w -Xy7-token
    expect "-Xy7-token" "$("$security" find-generic-password -a a -s s -w)"
    "$security" add-generic-password -a b -s s -w --
    expect "--" "$("$security" find-generic-password -a b -s s -w)" "even -- after -w is its value"
    "$security" add-generic-password -aattached -sdeploy -pSECRET    # attached values; -p is -w
    expect SECRET "$("$security" find-generic-password -aattached -sdeploy -w)"
    "$security" add-generic-password -U -a attached -s deploy -p ""  # an empty value is a value
    expect "" "$("$security" find-generic-password -a attached -s deploy -w)"
    "$security" set-keychain-settings -t3600
    grep -q 'timeout=3600s' <<< "$("$security" show-keychain-info 2>&1)"
    "$security" set-keychain-settings -lut 21600        # combined flags, then the value
    grep -q 'lock-on-sleep use-lock-interval timeout=21600s' <<< "$("$security" show-keychain-info 2>&1)"
    "$security" set-keychain-settings -u                # keychain_set_settings.c: -u without -t is no timeout
    grep -q 'no-timeout' <<< "$("$security" show-keychain-info 2>&1)"
    printf 'prompted\n' | "$security" add-internet-password -a a -s h.example -w
    expect prompted "$("$security" find-internet-password -s h.example -w)" "-w last prompts (stdin in a pipe)"
    printf -- '-dash\n' | "$security" create-keychain -p -other- other
    expect 0 "$(status_of "$security" unlock-keychain -p -other- other)"
    # Options end at the first operand or at "--"; "-" alone is an operand.
    expect x-in-other "$("$security" add-generic-password -a o -s s -w x-in-other other && "$security" find-generic-password -a o -w -- other)"
    expect 2 "$(status_of "$security" find-generic-password -Q)" "unknown option: usage"
    grep -q 'illegal option -- Q' <<< "$("$security" find-generic-password -Q 2>&1)"
    expect 2 "$(status_of "$security" find-generic-password -s)" "a value missing: usage"
}

# security.c: match_command (prefix, first in table order), the global options -v -q -i -p -h,
# usage() (status 2) and the interactive loop ("NAME: returned N").
prefixes_and_global_options() {
    make_keychain
    "$security" add-generic-password -a a -s s -w pw
    expect pw "$("$security" find-generic -s s -w)"
    grep -q login.keychain-db <<< "$("$security" list-keychain)"
    grep -q login.keychain-db <<< "$("$security" lis)"         # list-keychains comes before list-smartcards
    expect 1 "$("$security" dump | grep -c '^class: "genp"')"
    expect 1 "$(status_of "$security" list-keychainsX)" "longer than every name: unknown"
    # -v echoes the command (secrets hidden: CI logs are often public).
    "$security" -v add-generic-password -a v -s s -w verbose-secret 2>"$case_dir/err"
    grep -qx 'add-generic-password "-a" "v" "-s" "s" "-w" "<hidden>"' "$case_dir/err"
    refute grep -q verbose-secret "$case_dir/err"
    # -q: no warning about the secret in argv.
    expect "" "$("$security" -q add-generic-password -a q -s s -w x 2>&1)"
    # -i: commands from standard input; a failure is reported and the last status is returned.
    out=$(printf '%s\n' 'find-generic-password -s s -a a -w' "add-generic-password -a 'with space' -s s -w \"quoted pw\"" \
        'find-generic-password -a "with space" -w' 'find-generic-password -s missing' | "$security" -i 2>"$case_dir/err"; echo "rc=$?")
    expect "$(printf 'pw\nquoted pw\nrc=44')" "$out"
    grep -qx 'find-generic-password: returned 44' "$case_dir/err"
    expect pw "$(echo 'find-generic-password -a a -w' | "$security" -p 'kc> ')" "-p implies -i"
    # -h and help: every command; -h NAME: its usage; no command at all: usage, status 2.
    grep -q 'find-generic-password' <<< "$("$security" -h)"
    grep -q 'USAGE: security find-generic-password' <<< "$("$security" -h find-generic)"
    grep -q 'USAGE: security list-keychains' <<< "$("$security" help list-keychain)"
    grep -q 'SUBCOMMANDS' <<< "$("$security" --help)"
    expect 2 "$(status_of "$security")"
    grep -q '^Usage: security' <<< "$("$security")"
}

# security.c: execute_command's `unknown command "NAME"` (status 1), help's "no such command".
unknown_and_macos_only_commands() {
    make_keychain
    for line in "cms -D -i profile.mobileprovision" "authorizationdb read system.privilege.admin" \
                "verify-cert -c cert.pem" "add-trusted-cert -d -r trustRoot -k kc cert.pem" "error -25300" \
                "create-keypair -a rsa" "smartcards token -l"; do
        set -- $line
        expect 1 "$(status_of "$security" "$@")" "$1"
        err=$("$security" "$@" 2>&1 >/dev/null || true)
        expect 1 "$(echo "$err" | wc -l)" "one line for $1"
        [[ "$err" == "security: $1: not available on Linux"* ]] || { echo "$err"; return 1; }
    done
    expect 1 "$(status_of "$security" finde-generic-password -s x)"
    expect 'security: unknown command "finde-generic-password"' "$("$security" finde-generic-password -s x --weird 2>&1)"
    expect 'security: unknown command "--weird"' "$("$security" -v -- --weird 2>&1)"
    expect 1 "$(status_of "$security" help no-such-thing)"
    expect 'security: help: no such command: no-such-thing' "$("$security" help no-such-thing 2>&1)"
    expect 1 "$(status_of "$security" help cms)"
}

# keychain_find.c (do_keychain_delete_*: no attribute is SHOW_USAGE_MESSAGE); keychain_delete.c
# (SecKeychainDelete(NULL) is errSecInvalidKeychain); do_delete_certificate (no -c/-Z: usage).
no_accidental_deletes() {
    make_keychain
    "$security" import "$pki/alice.p12" -P p12pass >/dev/null 2>&1
    "$security" add-generic-password -a a -s s -w keep-g
    "$security" add-internet-password -a a -s h.example -w keep-i
    expect 2 "$(status_of "$security" delete-generic-password)"
    expect 2 "$(status_of "$security" delete-internet-password)"
    expect 2 "$(status_of "$security" delete-generic-password "$XDG_DATA_HOME/keychains/login.keychain-db")" "a keychain alone names no item"
    expect 2 "$(status_of "$security" delete-certificate)"
    expect 49 "$(status_of "$security" delete-keychain)" "errSecInvalidKeychain, as SecKeychainDelete(NULL)"
    [ -f "$XDG_DATA_HOME/keychains/login.keychain-db" ]
    expect keep-g "$("$security" find-generic-password -s s -w)"
    expect keep-i "$("$security" find-internet-password -s h.example -w)"
    expect 1 "$("$security" find-certificate -a | grep -c '^    "labl"<blob>="Alice Example"')"
    # find_unique_certificate: -Z takes the SHA-256 hash as well as the SHA-1.
    sha256=$(openssl x509 -in "$pki/alice.pem" -noout -fingerprint -sha256 | cut -d= -f2 | tr -d :)
    "$security" delete-certificate -Z "$sha256"
    expect 0 "$("$security" find-certificate -a 2>/dev/null | grep -c '^    "labl"<blob>="Alice Example"')"
}

# identity_find.m (headers only without -v, "%3d) "); keychain_utilities.c print_buffer (-g);
# keychain_find.c do_password_item_printing (-w: isprint, else "%02x"); keychain_add.c (label
# defaults to the service or server; authentication type "dflt"); keychain_show_info.c.
output_scripts_parse() {
    make_keychain login pw
    "$security" import "$pki/alice.p12" -P p12pass >/dev/null 2>&1
    first=$("$security" find-identity -v -p codesigning | head -1)
    [[ "$first" =~ ^\ \ 1\)\ [0-9A-F]{40}\ \"Alice\ Example\"$ ]] || { echo "got: [$first]"; return 1; }
    expect "$(printf '\nPolicy: Code Signing\n  Matching identities')" "$("$security" find-identity -p codesigning | head -3)"
    "$security" find-identity -s alice@example.org -v | head -1 | grep -qx 'Looking for identities matching "alice@example.org"'
    expect 2 "$("$security" find-identity -p basic -p smime | grep -c '^Policy: ')" "one search per policy"
    expect 2 "$(status_of "$security" find-identity -p no-such-policy)"
    # -g as print_buffer prints: quotes unescaped; a backslash, control or non-ASCII byte: hex too.
    "$security" add-generic-password -a quote -s s -w 'say "hi"'
    expect 'password: "say "hi""' "$("$security" find-generic-password -a quote -g 2>&1 >/dev/null)"
    "$security" add-generic-password -a backslash -s s -w 'a\b'
    expect 'password: 0x615C62  "a\134b"' "$("$security" find-generic-password -a backslash -g 2>&1 >/dev/null)"
    "$security" add-generic-password -a utf8 -s s -w 'pä'
    expect 'password: 0x70C3A4  "p\303\244"' "$("$security" find-generic-password -a utf8 -g 2>&1 >/dev/null)"
    "$security" add-generic-password -a binary -s s -X 00ff
    expect 'password: 0x00FF ' "$("$security" find-generic-password -a binary -g 2>&1 >/dev/null)"
    # -w: the bytes when all are printable ASCII, else lowercase hex (isprint in the C locale).
    expect 'say "hi"' "$("$security" find-generic-password -a quote -w)"
    expect 70c3a4 "$("$security" find-generic-password -a utf8 -w)"
    expect 00ff "$("$security" find-generic-password -a binary -w)"
    # Labels default to the service / server; internet passwords get the "dflt" authentication type.
    grep -qx '    0x00000007 <blob>="s"' <<< "$("$security" find-generic-password -a quote)"
    "$security" add-internet-password -a a -s git.example -r htps -w x
    out=$("$security" find-internet-password -s git.example)
    grep -qx '    0x00000007 <blob>="git.example"' <<< "$out"
    grep -qx '    "atyp"<blob>="dflt"' <<< "$out"
    expect x "$("$security" find-internet-password -s git.example -t dflt -w)"
    # show-keychain-info: the "is it locked?" test of scripts.
    expect 0 "$(status_of "$security" show-keychain-info)"
    expect "" "$("$security" show-keychain-info 2>/dev/null)" "its line goes to stderr"
    "$security" lock-keychain
    expect 36 "$(status_of "$security" show-keychain-info)"
    "$security" unlock-keychain -p pw
    expect 0 "$(status_of "$security" show-keychain-info login.keychain)"
}

# readpassphrase-style prompts (keychain_utilities.c prompt_password uses getpass): Ctrl-C or
# SIGTERM at a prompt must leave the terminal echoing.
terminal_safety() {
    make_keychain
    "$security" lock-keychain
    for how in ctrl-c sigterm sighup; do
        python3 "$here/pty_signal.py" "$how" "password to unlock" -- "$security" unlock-keychain \
            || { echo "echo not restored after $how"; return 1; }
    done
    python3 "$here/pty_signal.py" ctrl-c "retype password for new item" -- "$security" add-generic-password -a a -s s -w
    expect 44 "$(status_of "$security" find-generic-password -a a -s s)" "nothing stored"
}

# Bytes are bytes: argv is not text. A name that is not UTF-8 is refused (errSecParam), never
# turned into U+FFFD; a password is stored byte for byte.
bytes_are_bytes() {
    make_keychain
    expect 206 "$(status_of "$security" add-generic-password -a $'\xff' -s s -w one)"
    expect 206 "$(status_of "$security" add-generic-password -a $'\xfe' -s s -w two)"
    grep -q 'not valid UTF-8' <<< "$("$security" add-generic-password -a $'\xff' -s s -w one 2>&1)"
    expect 0 "$("$security" dump-keychain 2>/dev/null | grep -c '^class')" "nothing stored"
    expect 206 "$(status_of "$security" find-generic-password -a $'\xff')"
    "$security" add-generic-password -a bytes -s s -w $'\xff\xfe\x01'
    expect fffe01 "$("$security" find-generic-password -a bytes -w)"
    "$security" add-generic-password -a 'é' -s s -w accent
    expect accent "$("$security" find-generic-password -a 'é' -w)"
    grep -qx '    "acct"<blob>=0xC3A9 ' <<< "$("$security" find-generic-password -a 'é')"
}

# Issue 20, point 4: a secret in argv is visible in /proc/PID/cmdline. The tool warns on stderr
# (exit status and stdout unchanged), and overwrites the secret in its argv, so that a reader
# of /proc/PID/cmdline after start-up sees no secret.
argv_secrets() {
    make_keychain login the-old-password
    out=$("$security" add-generic-password -a a -s s -w visible-pw 2>"$case_dir/err"; echo "rc=$?")
    expect "rc=0" "$out" "stdout and status as on macOS"
    expect 1 "$(grep -c 'warning: a password given with -w is visible' "$case_dir/err")"
    expect visible-pw "$("$security" find-generic-password -a a -s s -w 2>/dev/null)"
    # The attack: read the command line of a running `security` from another process. The
    # command waits for its new password on a FIFO, after it has read its argv.
    mkfifo "$case_dir/fifo"
    "$security" set-keychain-password -o the-old-password < "$case_dir/fifo" 2>"$case_dir/err2" &
    pid=$!
    exec 3>"$case_dir/fifo"
    for _ in $(seq 100); do grep -q warning "$case_dir/err2" && break; sleep 0.1; done
    grep -q warning "$case_dir/err2"
    cmdline=$(tr '\0' ' ' < /proc/$pid/cmdline)
    [[ "$cmdline" == *set-keychain-password* ]] || { echo "not the process: $cmdline"; return 1; }
    [[ "$cmdline" != *the-old-password* ]] || { echo "the secret is still in /proc/$pid/cmdline: $cmdline"; return 1; }
    printf 'the-new-password\n' >&3
    exec 3>&-
    wait $pid
    "$security" lock-keychain
    "$security" unlock-keychain -p the-new-password 2>/dev/null
}

# Issue 20, point 4: the README's examples keep secrets out of argv and no longer claim that
# secrets never travel in argv. The examples that left the README (docs/, the man pages) too.
readme_examples() {
    local docs=("$here/../../README.md" "$here"/../../docs/*.md "$here"/../../man/*.scd)
    refute grep -n 'Secrets never travel in argv' "${docs[@]}"
    # Command lines in its examples (comments after "#" left out): no secret after -w, -p, -P, -o, -k.
    refute grep -nE '^(printf .*\| )?security [a-z-]+ [^#]*-w [^ |#]' "${docs[@]}"
    refute grep -nE '^(printf .*\| )?security (create|unlock|set)-[a-z-]+( [^#]*)? -[pPok] [^ |#]' "${docs[@]}"
    refute grep -nE '^(printf .*\| )?security (import|export) [^#]* -P [^ |#]' "${docs[@]}"
}

# GitHub's "Installing an Apple certificate on macOS runners for Xcode development", its
# security lines as published, run as one `set -e` script: the keychain under
# $XDG_DATA_HOME/keychains, the signing certificate made by openssl, GNU base64's spelling.
github_certificate_recipe() {
    mkdir -p "$case_dir/runner"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$case_dir/dev.key" -out "$case_dir/dev.pem" -days 30 \
        -subj "/CN=Apple Development: CI Runner (TEAM123456)" -addext "extendedKeyUsage=codeSigning" 2>/dev/null
    openssl pkcs12 -export -in "$case_dir/dev.pem" -inkey "$case_dir/dev.key" -passout pass:p12-secret -out "$case_dir/dev.p12"
    BUILD_CERTIFICATE_BASE64=$(base64 -w0 "$case_dir/dev.p12") P12_PASSWORD=p12-secret \
    KEYCHAIN_PASSWORD=-generated-Pw3 RUNNER_TEMP=$case_dir/runner KEYCHAINS=$XDG_DATA_HOME/keychains \
    PATH=$(dirname "$security"):$PATH bash -e <<'RECIPE' > "$case_dir/recipe.out" 2>"$case_dir/recipe.err"
# create variables
CERTIFICATE_PATH=$RUNNER_TEMP/build_certificate.p12
KEYCHAIN_PATH=$KEYCHAINS/app-signing.keychain-db

# import certificate and provisioning profile from secrets
echo -n "$BUILD_CERTIFICATE_BASE64" | base64 --decode > $CERTIFICATE_PATH

# create temporary keychain
security create-keychain -p "$KEYCHAIN_PASSWORD" $KEYCHAIN_PATH
security set-keychain-settings -lut 21600 $KEYCHAIN_PATH
security unlock-keychain -p "$KEYCHAIN_PASSWORD" $KEYCHAIN_PATH

# import certificate to keychain
security import $CERTIFICATE_PATH -P "$P12_PASSWORD" -A -t cert -f pkcs12 -k $KEYCHAIN_PATH
security set-key-partition-list -S apple-tool:,apple: -k "$KEYCHAIN_PASSWORD" $KEYCHAIN_PATH
security list-keychain -d user -s $KEYCHAIN_PATH

# what the build then does: find the signing identity
security find-identity -v -p codesigning | head -1
echo "recipe ran to the end"
RECIPE
    tail -1 "$case_dir/recipe.out" | grep -qx 'recipe ran to the end' || { cat "$case_dir/recipe.out" "$case_dir/recipe.err"; return 1; }
    grep -q '^  1) [0-9A-F]\{40\} "Apple Development: CI Runner (TEAM123456)"$' "$case_dir/recipe.out"
    expect "    \"$XDG_DATA_HOME/keychains/app-signing.keychain-db\"" "$("$security" list-keychains -d user)"
    grep -q 'timeout=21600s' <<< "$("$security" show-keychain-info app-signing.keychain-db 2>&1)"
    # The recipe's clean-up step (on self-hosted runners).
    "$security" delete-keychain "$XDG_DATA_HOME/keychains/app-signing.keychain-db"
    [ ! -e "$XDG_DATA_HOME/keychains/app-signing.keychain-db" ]
    expect "" "$("$security" list-keychains)"
}

# Issue 20, point 11: a password read from standard input or typed twice at the terminal leaves
# no copy in the tool's memory once it is used. The attack: root reads /proc/PID/mem of a
# `security create-keychain one two` that made "one" and waits for the second password.
secrets_leave_memory() {
    if [ "$(id -u)" != 0 ]; then echo "needs root to read an undumpable process's memory"; return 1; fi
    mkfifo "$case_dir/fifo"
    "$security" create-keychain one two < "$case_dir/fifo" 2>/dev/null &
    pid=$!
    exec 3>"$case_dir/fifo"
    printf 'Piped-Secret-0815\n' >&3
    for _ in $(seq 100); do [ -e "$XDG_DATA_HOME/keychains/one.keychain-db" ] && break; sleep 0.1; done
    # Done with "one" once it waits for the second password on its standard input (not after a
    # fixed sleep, which the key derivation outlasts on a loaded machine).
    wait_reading_stdin "$pid"
    python3 "$here/memscan.py" "$pid" Piped-Secret-0815 || { kill $pid; return 1; }
    printf 'second\n' >&3
    exec 3>&-
    wait $pid
    # At the terminal: the password and its retyped copy.
    python3 "$here/pty_memory.py" Typed-Secret-4711 -- "$security" create-keychain three four
}
