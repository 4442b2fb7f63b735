#!/usr/bin/env bash
# Drives the built `security` binary as a user would: real processes, real files, the real kernel
# keyring. Each case gets its own HOME and XDG folders; every keychain made is deleted (and its
# kernel keys removed) at the end of its case.
set -uo pipefail
security=$(realpath "${1:-.build/debug/security}")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

fresh() {
    case_dir=$(mktemp -d /tmp/security-cli-XXXXXX)
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config
    unset KEYCHAIN_PATH
}

finish() {
    for kc in "$XDG_DATA_HOME"/keychains/*.keychain-db; do
        [ -e "$kc" ] && "$security" delete-keychain "$kc" >/dev/null 2>&1
    done
    rm -rf "$case_dir"
}




# Certificates made once per run by openssl (before the cases, which run in subshells): a root
# CA, Alice (EC key, email in subject and subjectAltName) and an expired certificate issued by
# it, and a PKCS#12 of Alice's identity.
make_pki() {
    pki=$(mktemp -d /tmp/security-cli-pki-XXXXXX)
    (
        cd "$pki" && mkdir db && : > db/index.txt && echo 1000 > db/serial
        printf '%s\n' '[ca]' 'default_ca = t' '[t]' 'database = db/index.txt' 'new_certs_dir = db' 'serial = db/serial' \
            'default_md = sha256' 'policy = any' 'unique_subject = no' 'copy_extensions = copy' \
            '[any]' 'commonName = supplied' 'emailAddress = optional' > ca.cnf
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj "/CN=CLI Test Root" 2>/dev/null
        openssl ecparam -name prime256v1 -genkey -noout -out alice.key
        openssl req -new -key alice.key -subj "/CN=Alice Example/emailAddress=alice@example.com" \
            -addext "subjectAltName=email:alice@example.org" -out alice.csr
        openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in alice.csr -out alice.pem -days 30 -notext 2>/dev/null
        openssl req -new -newkey rsa:2048 -nodes -keyout old.key -subj "/CN=Expired Service" -out old.csr 2>/dev/null
        openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in old.csr -out old.pem \
            -startdate 20200101000000Z -enddate 20210101000000Z -notext 2>/dev/null
        openssl x509 -in ca.pem -outform DER -out ca.der
        openssl pkcs12 -export -in alice.pem -inkey alice.key -certfile ca.pem -name "Alice Identity" \
            -passout pass:p12pass -out alice.p12
    ) || { echo "openssl could not make the test certificates" >&2; return 1; }
}

make_keychain() { printf '%s\n' "${2:-pw}" | "$security" create-keychain "${1:-login}"; }

# --- cases ---------------------------------------------------------------------------------

macos_script_line() {
    make_keychain
    out=$("$security" add-internet-password -a alice -s example.com -r htps -w s3cret && "$security" find-internet-password -s example.com -w)
    expect "s3cret" "$out" "the macOS script's output"
}

not_found_exit_code() {
    make_keychain
    expect 44 "$(status_of "$security" find-generic-password -s nothing)"
    expect 44 "$(status_of "$security" find-internet-password -s nothing)"
    expect 44 "$(status_of "$security" delete-generic-password -s nothing)"
    expect 44 "$(status_of "$security" delete-internet-password -s nothing)"
    err=$("$security" find-generic-password -s nothing 2>&1 >/dev/null || true)
    expect 1 "$(echo "$err" | wc -l)" "one line of error"
    [[ "$err" == *errSecItemNotFound* ]]
}

duplicate_and_update() {
    make_keychain
    "$security" add-generic-password -a a -s s -w one
    expect 45 "$(status_of "$security" add-generic-password -a a -s s -w two)"
    expect one "$("$security" find-generic-password -a a -s s -w)"
    "$security" add-generic-password -U -a a -s s -w two -l "new label"
    expect two "$("$security" find-generic-password -a a -s s -w)"
    "$security" find-generic-password -a a -s s | grep -q '0x00000007 <blob>="new label"'
    expect 1 "$("$security" dump-keychain | grep -c '^class: "genp"')" "one item after -U"
}

find_output_format() {
    make_keychain
    "$security" add-internet-password -a alice -s example.com -r htps -P 8443 -p /repo -d realm -t dflt -j note -l Label -w pw
    out=$("$security" find-internet-password -s example.com -g 2>"$case_dir/err")
    grep -qx 'class: "inet"' <<< "$out"
    grep -qx '    "acct"<blob>="alice"' <<< "$out"
    grep -qx '    "srvr"<blob>="example.com"' <<< "$out"
    grep -qx '    "ptcl"<uint32>="htps"' <<< "$out"
    grep -qx '    "port"<uint32>=0x000020FB ' <<< "$out"
    grep -qx '    "path"<blob>="/repo"' <<< "$out"
    grep -qx '    "sdmn"<blob>="realm"' <<< "$out"
    grep -qx '    "icmt"<blob>="note"' <<< "$out"
    grep -qx '    0x00000007 <blob>="Label"' <<< "$out"
    expect 'password: "pw"' "$(cat "$case_dir/err")" "-g prints the password on stderr"
    ! grep -q pw\" <<< "$out"
    # Filters narrow: another port or protocol does not match.
    expect 44 "$(status_of "$security" find-internet-password -s example.com -P 443)"
    expect 44 "$(status_of "$security" find-internet-password -s example.com -r http)"
    expect pw "$("$security" find-internet-password -a alice -s example.com -r htps -P 8443 -p /repo -w)"
}

generic_attributes() {
    make_keychain
    "$security" add-generic-password -a a -s svc -G gen -D kind -c abcd -C wxyz -j comment -w pw
    out=$("$security" find-generic-password -s svc -D kind)
    grep -qx '    "gena"<blob>="gen"' <<< "$out"
    grep -qx '    "desc"<blob>="kind"' <<< "$out"
    grep -qx '    "crtr"<uint32>="abcd"' <<< "$out"
    grep -qx '    "type"<uint32>="wxyz"' <<< "$out"
    expect pw "$("$security" find-generic-password -c abcd -w)"
    expect 44 "$(status_of "$security" find-generic-password -s svc -G other)"
}

delete_removes_one() {
    make_keychain
    "$security" add-generic-password -a a -s s -w 1
    "$security" add-generic-password -a b -s s -w 2
    # keychain_find.c: the item's attributes on stdout, "password has been deleted." on stderr.
    out=$("$security" delete-generic-password -s s 2>"$case_dir/err")
    grep -qx '    "acct"<blob>="a"' <<< "$out"
    grep -qx 'password has been deleted.' "$case_dir/err"
    expect 2 "$("$security" find-generic-password -s s -w)"
    "$security" add-internet-password -a a -s h -w 3
    "$security" delete-internet-password -s h >/dev/null
    expect 44 "$(status_of "$security" find-internet-password -s h)"
}

lock_states() {
    make_keychain login "the password"
    "$security" add-generic-password -a wu -s s -w wu-secret
    "$security" add-generic-password -a afu -s s --accessibility afterFirstUnlock -w afu-secret
    "$security" add-generic-password -a always -s s --accessibility always -w always-secret
    "$security" status | grep -q '^WhenUnlocked: *unlocked'
    "$security" lock-keychain
    "$security" status | grep -q '^WhenUnlocked: *locked'
    "$security" status | grep -q '^AfterFirstUnlock: *unlocked'
    expect 36 "$(status_of "$security" find-generic-password -a wu -w)" "WhenUnlocked refused"
    { "$security" find-generic-password -a wu -w 2>&1 || true; } | grep -q 'security unlock-keychain'
    expect afu-secret "$("$security" find-generic-password -a afu -w)"
    expect always-secret "$("$security" find-generic-password -a always -w)"
    expect 36 "$(status_of "$security" add-generic-password -a new -s s -w x)"
    expect 51 "$(printf 'wrong\n' | status_of "$security" unlock-keychain)" "wrong password"
    printf 'the password\n' | "$security" unlock-keychain
    expect wu-secret "$("$security" find-generic-password -a wu -w)"
    "$security" unlock-keychain -p "the password"
}

lock_all() {
    make_keychain one
    make_keychain two
    "$security" add-generic-password -a a -s s -w x one
    "$security" add-generic-password -a a -s s -w x two
    "$security" lock-keychain -a
    expect 36 "$(status_of "$security" find-generic-password -a a one)"
    expect 36 "$(status_of "$security" find-generic-password -a a two)"
}

keychain_management() {
    make_keychain work
    [ -f "$XDG_DATA_HOME/keychains/work.keychain-db" ]
    expect 600 "$(stat -c %a "$XDG_DATA_HOME/keychains/work.keychain-db")"
    expect 700 "$(stat -c %a "$XDG_DATA_HOME/keychains")"
    "$security" list-keychains | grep -qx "    \"$XDG_DATA_HOME/keychains/work.keychain-db\""
    "$security" default-keychain | grep -qx "    \"$XDG_DATA_HOME/keychains/login.keychain-db\""
    "$security" default-keychain -s work
    "$security" default-keychain | grep -qx "    \"$XDG_DATA_HOME/keychains/work.keychain-db\""
    "$security" add-generic-password -a a -s s -w in-work
    expect in-work "$("$security" find-generic-password -a a -w work.keychain)"
    expect 48 "$(status_of "$security" create-keychain -p x work)" "create over an existing keychain: errSecDuplicateKeychain"
    # keychain_show_info.c prints on stderr, in its own words (-l is "lock-on-sleep" there).
    "$security" show-keychain-info 2>&1 | grep -q 'no-timeout'
    "$security" set-keychain-settings -l -t 600
    "$security" show-keychain-info 2>&1 | grep -q 'lock-on-sleep use-lock-interval timeout=600s'
    "$security" set-keychain-settings
    "$security" show-keychain-info 2>&1 | grep -qv 'lock-on-sleep'
    "$security" delete-keychain work
    [ ! -e "$XDG_DATA_HOME/keychains/work.keychain-db" ]
    expect "" "$("$security" list-keychains)"
}

keychain_password_change() {
    make_keychain login old
    "$security" add-generic-password -a a -s s -w kept
    "$security" set-keychain-password -o old -p new
    "$security" lock-keychain
    expect 51 "$(printf 'old\n' | status_of "$security" unlock-keychain)"
    printf 'new\n' | "$security" unlock-keychain
    expect kept "$("$security" find-generic-password -a a -w)"
    expect 51 "$(status_of "$security" set-keychain-password -o wrong -p x)"
}

prompts_on_a_terminal() {
    drive="python3 $here/pty_drive.py"
    out=$($drive "password for new keychain: =tty secret" "retype password for new keychain: =tty secret" -- "$security" create-keychain)
    ! grep -q 'tty secret' <<< "$out"   # nothing is echoed
    "$security" lock-keychain
    $drive "password to unlock $XDG_DATA_HOME/keychains/login.keychain-db: =tty secret" -- "$security" unlock-keychain >/dev/null
    "$security" status | grep -q '^WhenUnlocked: *unlocked'
    # -w as the last argument prompts twice, as on macOS.
    out=$($drive "password data for new item: =item pw" "retype password for new item: =item pw" -- "$security" add-generic-password -a a -s s -w)
    ! grep -q 'item pw' <<< "$out"
    expect "item pw" "$("$security" find-generic-password -a a -s s -w)"
    # A mismatch is refused and nothing is stored.
    set +e
    $drive "password data for new item: =one" "retype password for new item: =two" -- "$security" add-generic-password -a b -s s -w >/dev/null
    rc=$?
    set -e
    expect 206 "$rc" "mismatched retype is errSecParam"
    expect 44 "$(status_of "$security" find-generic-password -a b -s s)"
    $drive "Old Password: =tty secret" "New Password: =next" "Retype New Password: =next" -- "$security" set-keychain-password >/dev/null
    "$security" unlock-keychain -p next
}

secrets_from_standard_input() {
    printf 'stdin pw\n' | "$security" create-keychain
    printf 'item secret\n' | "$security" add-generic-password -a a -s s -w
    expect "item secret" "$("$security" find-generic-password -a a -s s -w)"
    printf 'stdin pw\n' | "$security" unlock-keychain
    # No terminal and no standard input: a clear error, no hang.
    expect 206 "$(status_of "$security" add-generic-password -a b -s s -w </dev/null)"
}

hex_password() {
    make_keychain
    "$security" add-generic-password -a a -s s -X 00ff41
    # keychain_find.c prints -w with printf("%02x"): lowercase.
    expect 00ff41 "$("$security" find-generic-password -a a -w)" "binary passwords print as hex"
    "$security" find-generic-password -a a -g 2>&1 >/dev/null | grep -q '^password: 0x00FF41'
}

dump_keychain() {
    make_keychain
    "$security" add-generic-password -a a -s s -w one
    "$security" add-internet-password -a b -s h -w two
    "$security" add-generic-password -a c -s s --accessibility afterFirstUnlock -w three
    out=$("$security" dump-keychain)
    expect 2 "$(echo "$out" | grep -c '^class: "genp"')"
    expect 1 "$(echo "$out" | grep -c '^class: "inet"')"
    ! grep -q one <<< "$out"
    "$security" dump-keychain -d | grep -qx '"two"'
    "$security" lock-keychain
    out=$("$security" dump-keychain 2>"$case_dir/err")
    expect 1 "$(echo "$out" | grep -c '^class: ')" "only the AfterFirstUnlock item shows while locked"
    grep -q '2 item(s) not shown: locked' "$case_dir/err"
}

export_import_round_trip() {
    make_keychain source
    make_keychain target other
    "$security" add-generic-password -a portable -s s -w p1 source
    "$security" add-internet-password -a web -s example.com -r htps -P 8080 -w p2 -l "Web" source
    "$security" add-generic-password -a local -s s --accessibility whenUnlockedThisDeviceOnly -w p3 source
    "$security" add-generic-password -a local2 -s s --accessibility afterFirstUnlockThisDeviceOnly -w p4 source
    "$security" export -k source -o "$case_dir/backup" -P "backup pass" 2>"$case_dir/err"
    grep -q '2 item(s) exported, 2 ThisDeviceOnly item(s) left out' "$case_dir/err"
    expect 600 "$(stat -c %a "$case_dir/backup")"
    ! grep -q -a -e example.com -e p2 -e portable "$case_dir/backup"
    expect 51 "$(status_of "$security" import "$case_dir/backup" -k target -P wrong)"
    printf 'backup pass\n' | "$security" import "$case_dir/backup" -k target 2>"$case_dir/err"
    grep -q '2 item(s) imported, 0 already present' "$case_dir/err"
    expect p1 "$("$security" find-generic-password -a portable -w target)"
    expect p2 "$("$security" find-internet-password -s example.com -P 8080 -w target)"
    "$security" find-internet-password -s example.com target | grep -q '0x00000007 <blob>="Web"'
    expect 44 "$(status_of "$security" find-generic-password -a local target)"
    expect 44 "$(status_of "$security" find-generic-password -a local2 target)"
    "$security" import "$case_dir/backup" -k target -P "backup pass" 2>"$case_dir/err"
    grep -q '0 item(s) imported, 2 already present' "$case_dir/err"
    # Export refuses while items are locked rather than writing a partial backup.
    "$security" lock-keychain source
    expect 36 "$(status_of "$security" export -k source -o "$case_dir/partial" -P x)"
    [ ! -e "$case_dir/partial" ]
}

bad_input() {
    make_keychain
    # Usage errors exit 2 as SecurityTool's commands do (SHOW_USAGE_MESSAGE in security_tool.h);
    # a four-character code of another length is 1 (keychain_utilities.c's parse_fourcharcode);
    # an unknown command is 1 (security.c's execute_command).
    expect 2 "$(status_of "$security" add-internet-password -a a -s h -P 70000 -w x)" "port out of range is a usage error"
    expect 1 "$(status_of "$security" add-internet-password -a a -s h -r toolong -w x)"
    expect 2 "$(status_of "$security" add-generic-password -a a -s s --accessibility sometimes -w x)"
    expect 2 "$(status_of "$security" add-generic-password -X 0g -a a -s s)"
    expect 1 "$(status_of "$security" no-such-command)"
    chmod 666 "$XDG_DATA_HOME/keychains/login.keychain-db"
    err=$("$security" find-generic-password -s s 2>&1 || true)
    [[ "$err" == *"writable by group or others"* ]]
    chmod 600 "$XDG_DATA_HOME/keychains/login.keychain-db"
    printf 'garbage' > "$case_dir/bad.keychain-db"; chmod 600 "$case_dir/bad.keychain-db"
    expect 93 "$(status_of "$security" find-generic-password -s s "$case_dir/bad.keychain-db")" "not a keychain is errSecDecode"
    rm "$case_dir/bad.keychain-db"
    expect 50 "$(status_of "$security" find-generic-password -s s "$case_dir/missing.keychain-db")" "missing keychain is errSecNoSuchKeychain"
}

help_and_completion() {
    # grep without -q reads to the end: -q would exit at the first match and, under pipefail,
    # fail the case whenever the tool is still writing (SIGPIPE).
    for sub in create-keychain delete-keychain list-keychains default-keychain unlock-keychain lock-keychain \
               show-keychain-info set-keychain-settings set-keychain-password status add-generic-password \
               add-internet-password find-generic-password find-internet-password delete-generic-password \
               delete-internet-password dump-keychain export import; do
        "$security" help "$sub" | grep 'USAGE: security '"$sub" >/dev/null || { echo "no help for $sub"; return 1; }
        "$security" "$sub" --help >/dev/null
    done
    # Captured, not piped into grep -q: grep stops at the first match, and a script written in
    # several chunks then ends with SIGPIPE, which pipefail counts as a failure.
    local shell script
    for shell in bash zsh fish; do
        script=$("$security" --generate-completion-script "$shell")
        [[ "$script" == *find-internet-password* ]] || { echo "no completion for $shell"; return 1; }
    done
}

# Issue 52.12: the SSH agent's public list beside the keychain goes with it, or a keychain made
# again at that path would list keys it does not hold.
ssh_key_list_removed_with_the_keychain() {
    command -v ssh-keygen >/dev/null || { echo "ssh-keygen is missing (openssh-client)"; return 1; }
    make_keychain
    local kc=$XDG_DATA_HOME/keychains/login.keychain-db
    ssh-keygen -q -t ed25519 -N '' -C cli@suite -f "$case_dir/id_ed25519"
    "$security" import-ssh-keys "$case_dir/id_ed25519" >/dev/null 2>&1
    grep -q 'cli@suite' "$kc.ssh-keys"
    "$security" delete-keychain login
    [ ! -e "$kc" ]
    [ ! -e "$kc.ssh-keys" ] || { echo "left behind: $kc.ssh-keys"; return 1; }
}

keys_are_cleaned_up() {
    make_keychain
    "$security" add-generic-password -a a -s s -w x
    id=$(keychain_id)
    [ ${#id} -eq 32 ]
    in_kernel "keychain:$id:A"
    in_kernel "keychain:$id:C"
    "$security" lock-keychain
    ! in_kernel "keychain:$id:A"
    in_kernel "keychain:$id:C"
    "$security" delete-keychain login
    ! in_kernel "keychain:$id:C"
}

certificate_import_and_find() {
    make_keychain
    expect 51 "$(status_of "$security" import "$pki/alice.p12" -P wrong)" "wrong PKCS#12 passphrase: errSecAuthFailed"
    expect 0 "$("$security" dump-keychain 2>/dev/null | grep -c '^class')" "nothing stored by a refused import"
    expect "$(printf '1 identity imported.\n1 certificate imported.')" "$("$security" import "$pki/alice.p12" -P p12pass -f pkcs12)"
    expect "1 certificate imported." "$("$security" import "$pki/old.pem")" "PEM"
    expect 45 "$(status_of "$security" import "$pki/ca.der")" "DER, already there from the PKCS#12 chain"
    expect 3 "$("$security" find-certificate -a | grep -c '^class: 0x80001000')"
    # -c: common name, any case; -e: an address of the certificate; -a: all of them.
    "$security" find-certificate -c "alice ex" | grep -qx '    "labl"<blob>="Alice Example"'
    expect 44 "$(status_of "$security" find-certificate -c "nobody")"
    expect 44 "$(status_of "$security" find-certificate -e "bob@example.com")"
    expect "email addresses: alice@example.com, alice@example.org" "$("$security" find-certificate -e ALICE@example.org -m | head -1)"
    # -p: PEM that openssl reads back as the same certificate; -Z: the hashes openssl computes.
    "$security" find-certificate -c alice -p > "$case_dir/alice.pem"
    expect "$(openssl x509 -in "$pki/alice.pem" -noout -fingerprint -sha1)" "$(openssl x509 -in "$case_dir/alice.pem" -noout -fingerprint -sha1)"
    sha1=$(openssl x509 -in "$pki/alice.pem" -noout -fingerprint -sha1 | cut -d= -f2 | tr -d :)
    sha256=$(openssl x509 -in "$pki/alice.pem" -noout -fingerprint -sha256 | cut -d= -f2 | tr -d :)
    expect "$(printf 'SHA-256 hash: %s\nSHA-1 hash: %s' "$sha256" "$sha1")" "$("$security" find-certificate -c alice -Z | head -2)"
    expect 3 "$("$security" find-certificate -a -p | grep -c 'BEGIN CERTIFICATE')"
}

certificate_identities_export_delete() {
    make_keychain
    "$security" import "$pki/alice.p12" -P p12pass >/dev/null
    "$security" import "$pki/old.pem" >/dev/null
    "$security" import "$pki/old.key" >/dev/null
    out=$("$security" find-identity)
    grep -q '^  1) [0-9A-F]\{40\} "Alice Example"$' <<< "$out"
    grep -q '"Expired Service" (CSSMERR_TP_CERT_EXPIRED)$' <<< "$out"
    grep -qx '     2 identities found' <<< "$out"
    grep -qx '     1 valid identities found' <<< "$out"
    expect 1 "$("$security" find-identity -v | grep -c '^  [0-9])')" "-v: valid only"
    # Export: certificates as PEM; the identity only in a PKCS#12 that openssl opens.
    expect 3 "$("$security" export -t certs -p | grep -c 'BEGIN CERTIFICATE')"
    expect 206 "$(status_of "$security" export -t identities -P out -o "$case_dir/one.p12")" "two identities do not fit one file"
    "$security" delete-certificate -c "Expired"
    "$security" export -t identities -P out -o "$case_dir/alice.p12"
    openssl pkcs12 -in "$case_dir/alice.p12" -passin pass:out -nodes 2>/dev/null | grep -q 'BEGIN PRIVATE KEY'
    expect "$(openssl pkey -in "$pki/alice.key" -pubout)" "$(openssl pkcs12 -in "$case_dir/alice.p12" -passin pass:out -nocerts -nodes 2>/dev/null | openssl pkey -pubout)"
    # delete-certificate: by name (exactly one), by SHA-1 hash; a name matching several is refused.
    expect 206 "$(status_of "$security" delete-certificate -c "e")" "ambiguous name"
    sha1=$(openssl x509 -in "$pki/ca.pem" -noout -fingerprint -sha1 | cut -d= -f2)
    "$security" delete-certificate -Z "$sha1"
    expect 44 "$(status_of "$security" delete-certificate -Z "$sha1")"
    expect 1 "$("$security" find-certificate -a | grep -c '^class: 0x80001000')"
}

certificate_bad_input() {
    make_keychain
    printf 'hello' > "$case_dir/junk.pem"
    expect 93 "$(status_of "$security" import "$case_dir/junk.pem")" "not a certificate: errSecDecode (-26275)"
    head -c 200 "$pki/alice.p12" > "$case_dir/cut.p12"
    expect 93 "$(status_of "$security" import "$case_dir/cut.p12" -P p12pass)" "a truncated PKCS#12"
    expect 0 "$("$security" dump-keychain 2>/dev/null | grep -c '^class')" "nothing stored"
}

# The keychain's uuid, which names its keys in the kernel.
keychain_id() { sqlite3 "$XDG_DATA_HOME/keychains/login.keychain-db" "select hex(value) from keychain where name='uuid'" | tr A-F a-f; }
# Look in the persistent keyring from a throwaway session keyring, leaving the caller's alone.
in_kernel() { keyctl session - sh -c 'keyctl search "$(keyctl get_persistent @s)" user "$1" >/dev/null 2>&1' sh "$1"; }

# The attacker's file: the current items under the keybag of an old copy, which the old password
# opens. Built in the keychains folder so the case's clean-up deletes it and its kernel keys.
splice_old_keybag() {
    local old=$1 attack=$XDG_DATA_HOME/keychains/attack.keychain-db
    sqlite3 "$XDG_DATA_HOME/keychains/login.keychain-db" ".backup '$attack'"
    sqlite3 "$attack" "attach '$old' as o; delete from keychain; insert into keychain select * from o.keychain;"
    printf 'old\n' | "$security" unlock-keychain attack
}

rotate_keys_locks_out_an_old_copy() {
    make_keychain login old
    "$security" add-generic-password -a before -s s -w kept-before
    "$security" add-generic-password -a before-afu -s s -w kept-afu --accessibility afterFirstUnlock
    sqlite3 "$XDG_DATA_HOME/keychains/login.keychain-db" ".backup '$case_dir/stolen.db'"
    "$security" set-keychain-password --rotate-keys -o old -p new
    "$security" add-generic-password -a after -s s -w added-after
    # Every item survives, under the new password only.
    expect kept-before "$("$security" find-generic-password -a before -w)"
    expect kept-afu "$("$security" find-generic-password -a before-afu -w)"
    "$security" lock-keychain
    expect 51 "$(printf 'old\n' | status_of "$security" unlock-keychain)"
    printf 'new\n' | "$security" unlock-keychain
    expect added-after "$("$security" find-generic-password -a after -w)"
    # The old copy and the old password open nothing of the rotated file, old items or new.
    splice_old_keybag "$case_dir/stolen.db"
    for account in before before-afu after; do
        out=$("$security" find-generic-password -a "$account" -w attack 2>&1) && { echo "opened $account: $out"; return 1; }
        [[ "$out" != *kept* && "$out" != *added* ]]
    done
    expect 93 "$(status_of "$security" dump-keychain -d attack)" "the old keys open no row: errSecDecode"
}

plain_password_change_leaves_old_copy_working() {
    # What --rotate-keys closes, shown so the case above can fail.
    make_keychain login old
    sqlite3 "$XDG_DATA_HOME/keychains/login.keychain-db" ".backup '$case_dir/stolen.db'"
    "$security" set-keychain-password -o old -p new
    "$security" add-generic-password -a after -s s -w added-after
    splice_old_keybag "$case_dir/stolen.db"
    expect added-after "$("$security" find-generic-password -a after -w attack)"
}

planted_kernel_key_is_refused() {
    make_keychain
    "$security" add-generic-password -a a -s s -w x
    id=$(keychain_id)
    "$security" lock-keychain
    head -c 32 /dev/urandom | keyctl session - sh -c 'keyctl padd user "$1" "$(keyctl get_persistent @s)" >/dev/null' sh "keychain:$id:A"
    in_kernel "keychain:$id:A"
    expect 36 "$(status_of "$security" add-generic-password -a new -s s -w for-the-planter)" "locked: errSecInteractionNotAllowed"
    ! in_kernel "keychain:$id:A"
    "$security" status | grep '^WhenUnlocked: *locked' >/dev/null
    expect 1 "$("$security" status | sed -n 's/^items: *//p')" "nothing sealed under the planted key"
}

settings_are_authenticated() {
    make_keychain
    # show-keychain-info writes on stderr, as keychain_show_info.c does.
    "$security" set-keychain-settings -l -t 600
    "$security" show-keychain-info >"$case_dir/out" 2>&1
    grep 'lock-on-sleep use-lock-interval timeout=600s' "$case_dir/out" >/dev/null
    ! grep '^security:' "$case_dir/out" || return 1
    "$security" lock-keychain
    expect 36 "$(status_of "$security" set-keychain-settings -t 5 </dev/null)" "locked, no password: errSecInteractionNotAllowed"
    expect 51 "$(printf 'wrong\n' | status_of "$security" set-keychain-settings -t 5)"
    # Another process of the user rewrites them in the file: no lock at logout, no timeout.
    sqlite3 "$XDG_DATA_HOME/keychains/login.keychain-db" "update keychain set value = x'0000000000' where name = 'settings'"
    printf 'pw\n' | "$security" unlock-keychain 2>"$case_dir/err"
    grep -q 'changed without the keychain' "$case_dir/err"
    "$security" show-keychain-info >"$case_dir/out" 2>&1
    grep 'lock-on-sleep no-timeout' "$case_dir/out" >/dev/null
    grep -q 'changed without the keychain' "$case_dir/out"
    "$security" status | grep '^lock at logout: *yes' >/dev/null
    # The owner sets them again: with the password while locked.
    "$security" lock-keychain
    printf 'pw\n' | "$security" set-keychain-settings -t 300
    printf 'pw\n' | "$security" unlock-keychain
    "$security" show-keychain-info >"$case_dir/out" 2>&1
    grep 'Keychain ".*" use-lock-interval timeout=300s' "$case_dir/out" >/dev/null
    ! grep '^security:' "$case_dir/out" || return 1
}

kdf_floor_and_bounds() {
    make_keychain
    kc=$XDG_DATA_HOME/keychains/login.keychain-db
    n=$((16#$(sqlite3 "$kc" "select hex(substr(value, 1, 8)) from keychain where name = 'kdf'")))
    [ "$n" -ge $((1 << 17)) ] || { echo "N = $n below the floor"; return 1; }
    # A keybag asking for 16 GiB, its checksum made to fit: refused as damaged, no derivation run.
    # (On a copy: the original's clean-up needs its keybag intact.)
    bad=$case_dir/bad.keychain-db
    sqlite3 "$kc" ".backup '$bad'"
    /usr/bin/python3 - "$bad" <<'PY'
import hashlib, sqlite3, struct, sys
db = sqlite3.connect(sys.argv[1])
f = dict(db.execute("select name, value from keychain"))
f["kdf"] = struct.pack(">QQQ", 1 << 34, 8, 1) + f["kdf"][24:]
s = b"".join(struct.pack(">I", len(f[k])) + f[k] for k in ["uuid", "kdf", "wrap.A", "wrap.C", "check.A", "check.C", "key.D"])
db.execute("update keychain set value = ? where name = 'kdf'", (f["kdf"],))
db.execute("update keychain set value = ? where name = 'checksum'", (hashlib.sha256(s).digest(),))
db.commit()
PY
    expect 93 "$(printf 'pw\n' | status_of "$security" unlock-keychain "$bad")" "absurd KDF parameters: errSecDecode"
    out=$(printf 'pw\n' | "$security" unlock-keychain "$bad" 2>&1 || true)
    [[ "$out" == *"KDF parameters out of bounds"* ]]
}

# --require: conditions on the item kept as kSecAttrAccessControl. An application password seals
# the secret (read from standard input here, one line per question); user presence asks polkit,
# which nobody answers in this suite (Tests/presence has a real one).
require_conditions() {
    make_keychain
    printf 'app-pass\n' | "$security" add-generic-password -a a -s sealed -X 6170702d736563726574 --require application-password
    expect app-secret "$(printf 'app-pass\n' | "$security" find-generic-password -a a -s sealed -w)" "the application password opens it"
    expect 51 "$(printf 'wrong\n' | status_of "$security" find-generic-password -a a -s sealed -w)" "a wrong one: errSecAuthFailed"
    "$security" find-generic-password -a a -s sealed </dev/null | grep -q '"svce"<blob>="sealed"'
    ! "$security" dump-keychain -d </dev/null 2>/dev/null | grep -q app-secret
    "$security" add-generic-password -a a -s guarded -w s3cret --require user-presence 2>/dev/null
    "$security" find-generic-password -a a -s guarded | grep -q '"acct"<blob>="a"'
    expect 36 "$(KEYCHAIN_PRESENCE_TIMEOUT=5 status_of "$security" find-generic-password -a a -s guarded -w </dev/null)" \
        "nobody to ask: errSecInteractionNotAllowed"
    expect 2 "$(status_of "$security" add-generic-password -a b -s x -w y --require presence)" "an unknown condition is a usage error"
    expect 53 "$(status_of "$security" add-generic-password -a b -s x -w y --require biometry-any 2>/dev/null)" \
        "biometry with no finger enrolled: errSecNotAvailable"
}

check "macOS script line prints s3cret" macos_script_line
check "not found exits 44 with one line" not_found_exit_code
check "duplicates exit 45; -U updates" duplicate_and_update
check "find output and filters as macOS" find_output_format
check "generic attributes" generic_attributes
check "delete removes one item" delete_removes_one
check "lock: WhenUnlocked refused, AfterFirstUnlock served" lock_states
check "lock-keychain -a" lock_all
check "create, list, default, settings, delete" keychain_management
check "set-keychain-password" keychain_password_change
check "prompts on a terminal, without echo" prompts_on_a_terminal
check "secrets from standard input" secrets_from_standard_input
check "hex passwords" hex_password
check "--require: application password and user presence" require_conditions
check "dump-keychain" dump_keychain
check "export/import drops ThisDeviceOnly" export_import_round_trip
check "bad input gets clear errors" bad_input
check "help and completion for every subcommand" help_and_completion
check "kernel keys removed with the keychain" keys_are_cleaned_up
check "the SSH keys' public list removed with the keychain (issue 52)" ssh_key_list_removed_with_the_keychain
check "set-keychain-password --rotate-keys: an old copy and password open nothing" rotate_keys_locks_out_an_old_copy
check "a plain password change: an old copy opens new items (documented)" plain_password_change_leaves_old_copy_working
check "a key planted in the kernel is refused and removed" planted_kernel_key_is_refused
check "settings: authenticated, changed only unlocked or with the password" settings_are_authenticated
check "KDF: tuned at or above N=2^17; absurd parameters errSecDecode" kdf_floor_and_bounds
make_pki
trap 'rm -rf "$pki"' EXIT
check "certificates: import PEM/DER/PKCS#12, find-certificate -c -e -a -p -Z -m" certificate_import_and_find
check "identities: find-identity, export, delete-certificate" certificate_identities_export_delete
check "certificates: bad files refused, nothing stored" certificate_bad_input

. "$here/macos_cases.sh"
check "search list and domains (keychain_list.c)" search_list_and_domains
check "partition lists: password checked, the items' lists set (keychain_find.c)" partition_lists
check "getopt: values starting with -, attached values, -p as -w (keychain_add.c)" getopt_compatible_parsing
check "command prefixes, -v -q -i -p -h (security.c)" prefixes_and_global_options
check "unknown and macOS-only commands: one line, status 1 (security.c)" unknown_and_macos_only_commands
check "no accidental deletes (keychain_find.c, keychain_delete.c)" no_accidental_deletes
check "output scripts parse (identity_find.m, keychain_utilities.c, keychain_show_info.c)" output_scripts_parse
check "Ctrl-C, SIGTERM, SIGHUP at a prompt restore echo" terminal_safety
check "bytes are bytes: non-UTF-8 names refused, passwords kept" bytes_are_bytes
check "argv secrets: warned about, wiped from /proc/PID/cmdline (issue 20.4/20.11)" argv_secrets
check "README, docs and man examples keep secrets out of argv (issue 20.4)" readme_examples
check "passwords piped or typed leave no copy in memory (issue 20.11)" secrets_leave_memory
check "GitHub's certificate recipe under set -e" github_certificate_recipe

. "$here/access_cases.sh"
check "access lists: add-* -T/-A/-T \"\", -U keeps the list" add_writes_the_list
check "access lists: -T of a missing path, a bundle name, a directory" add_refuses_bad_programs
check "access lists: security access --grant/--revoke/--interpreter" access_grants_and_revokes
check "access lists: security access --program --list/--revoke" access_by_program
check "access lists: shown by find --access and dump -a only, never as tapp" lists_shown_only_when_asked
check "access lists: an item from before lists starts from the front end its kind names" legacy_items_start_from_their_front_end

summary
