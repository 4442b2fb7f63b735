# shellcheck shell=bash disable=SC2154 # case_dir and XDG_DATA_HOME come from the runner's fresh
# `security import-secrets --kwallet FILE | --kwallets | --all`: KWallet's .kwl files read
# directly, with the wallets the real kwalletd5 wrote (Tests/kde/kwl-fixtures, made by
# make-kwl-fixtures.sh; their passwords below). Sourced by the KDE suite's runner (Tests/kde/run.sh),
# which gives: check, expect, a `fresh` setting $case_dir, $HOME and $XDG_DATA_HOME,
# `security` on $PATH.

kwl_fixtures=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kwl-fixtures
kwl_password='kwl fixture pässword'
kwl_work_password='work password'

kwl_wallets() {
    mkdir -p "$XDG_DATA_HOME/kwalletd"
    cp "$kwl_fixtures"/kdewallet.kwl "$kwl_fixtures"/kdewallet.salt "$kwl_fixtures"/kdewallet_attributes.json \
        "$kwl_fixtures"/work.kwl "$kwl_fixtures"/work.salt "$XDG_DATA_HOME/kwalletd/"
    wallets=$XDG_DATA_HOME/kwalletd
}

kwl_sha() { sha256sum "$1" | cut -d' ' -f1; }

kwl_kdewallet() {
    kwl_wallets
    local out=$case_dir/out err=$case_dir/err before
    # A dry run lists each entry, the empty folder and the Secret Service item; it changes nothing.
    printf '%s\n' "$kwl_password" | security import-secrets --kwallet "$wallets/kdewallet.kwl" -n > "$out"
    cat "$out"
    grep -qx "would add    $wallets/kdewallet.kwl: folder Empty Folder" "$out"
    grep -qx "would add    $wallets/kdewallet.kwl: Ünïcødé €/clé 🔑" "$out"
    grep -qx "would add    $wallets/kdewallet.kwl: \"GitHub token\"" "$out"
    expect "import-secrets: dry run: 6 would be added, 0 already there; nothing was changed" "$(tail -1 "$out")"
    [ ! -e "$XDG_DATA_HOME/keychains/login.keychain-db" ]

    printf '%s\n' "$kwl_password" | security import-secrets --kwallet "$wallets/kdewallet.kwl" > "$out" 2> "$err"
    cat "$out" "$err"
    expect "import-secrets: 6 added, 0 already there" "$(tail -1 "$out")"
    # kdewallet is the login keychain, made with the wallet's password.
    security lock-keychain login
    printf '%s\n' "$kwl_password" | security unlock-keychain login
    # Each KWallet entry as the contract keeps it: service = folder, account = key.
    expect s3cret "$(security find-generic-password -s Passwords -a smtp://alice@example.org -w)"
    # (-w shows a secret that is not ASCII in hex, as macOS's does.)
    expect "$(printf 'mot de passe ✓' | od -An -tx1 | tr -d ' \n')" "$(security find-generic-password -s 'Ünïcødé €' -a 'clé 🔑' -w)"
    expect "$(printf '%02x' $(seq 0 255))00ff" "$(security find-generic-password -s Binary -a blob -w)" "the binary entry, byte for byte"
    # The map as Qt wrote it: {pass: päss, user: alice}.
    expect 00000002000000080070006100730073000000080070 "$(security find-generic-password -s 'Form Data' -a https://example.org/login -w | head -c 44)"
    # kwalletd's Secret Service item comes as that item (its label and attributes), not as an entry.
    expect ghp_fixture "$(security find-generic-password -l 'GitHub token' -s github.com -a alice -w)"
    expect 44 "$(security find-generic-password -l 'Secret Service/GitHub token' >/dev/null 2>&1; echo $?)" "not also an entry"
    expect 44 "$(security find-generic-password -s 'Secret Service' >/dev/null 2>&1; echo $?)" "not also an entry"

    # Again: nothing added, nothing changed, the wallet untouched.
    before=$(security dump-keychain -d login 2>/dev/null | sha256sum)
    printf '%s\n' "$kwl_password" | security import-secrets --kwallet "$wallets/kdewallet.kwl" > "$out"
    expect "import-secrets: 0 added, 6 already there" "$(tail -1 "$out")"
    expect "$before" "$(security dump-keychain -d login 2>/dev/null | sha256sum)" "the keychain is unchanged"
    expect "$(kwl_sha "$kwl_fixtures/kdewallet.kwl")" "$(kwl_sha "$wallets/kdewallet.kwl")" "the wallet is unchanged"
}

kwl_folder_and_wrong_password() {
    kwl_wallets
    local out=$case_dir/out err=$case_dir/err status
    # kdewallet first: its line is the wrong password; work still comes, to a keychain of its name.
    status=0
    printf 'not it\n%s\n' "$kwl_work_password" | security import-secrets --kwallets > "$out" 2> "$err" || status=$?
    cat "$out" "$err"
    expect 51 "$status" "errSecAuthFailed, as for a keyring's wrong password"
    expect 1 "$(grep -cv 'created the keychain' "$err")" "one line"
    grep -q "kdewallet.kwl: wrong password for this wallet" "$err"
    expect "import-secrets: 1 added, 0 already there, 1 could not come" "$(tail -1 "$out")"
    expect vpn-secret "$(security find-generic-password -s Passwords -a vpn -w work)"
    [ ! -e "$XDG_DATA_HOME/keychains/login.keychain-db" ]
    # The right passwords: kdewallet comes, work is already there.
    printf '%s\n%s\n' "$kwl_password" "$kwl_work_password" | security import-secrets --kwallets > "$out"
    expect "import-secrets: 6 added, 1 already there" "$(tail -1 "$out")"
    # --all takes the wallets too (and, with nothing else here, says nothing of git or docker).
    printf '%s\n%s\n' "$kwl_password" "$kwl_work_password" | security import-secrets --all > "$out"
    expect "import-secrets: 0 added, 7 already there" "$(tail -1 "$out")"
}

kwl_gpg_and_hostile_files() {
    kwl_wallets
    local err=$case_dir/err status
    # A GPG wallet: one line, no password asked (standard input is empty).
    cp "$wallets/work.kwl" "$wallets/gpg.kwl"
    printf '\002\000' | dd of="$wallets/gpg.kwl" bs=1 seek=14 conv=notrunc 2>/dev/null
    status=0
    timeout 10 security import-secrets --kwallet "$wallets/gpg.kwl" < /dev/null > /dev/null 2> "$err" || status=$?
    cat "$err"
    expect 1 "$(wc -l < "$err" | tr -d ' ')" "one line"
    grep -q "gpg.kwl: a GPG-encrypted wallet is not readable here" "$err"
    expect 93 "$status" "errSecDecode"
    # Truncated, junk and oversized files: one line each, at once.
    head -c 300 "$wallets/kdewallet.kwl" > "$wallets/short.kwl"
    cp "$wallets/kdewallet.salt" "$wallets/short.salt"
    head -c 4096 /dev/urandom > "$wallets/junk.kwl"
    { cat "$wallets/kdewallet.kwl"; head -c $((65 << 20)) /dev/zero; } > "$wallets/big.kwl"
    status=0
    timeout 10 security import-secrets -p "$kwl_password" --kwallet "$wallets/short.kwl" --kwallet "$wallets/junk.kwl" \
        --kwallet "$wallets/big.kwl" > /dev/null 2> "$err" || status=$?
    cat "$err"
    expect 3 "$(grep -cv 'given with -p' "$err")" "one line each"
    grep -q "short.kwl: .*\(truncated\|wrong password\)" "$err"
    grep -q "junk.kwl: not a KWallet wallet file" "$err"
    grep -q "big.kwl: .*larger than" "$err"
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ]
}

kde_kwl_cases() {
    check "kdewallet.kwl from kwalletd5: dry run, every entry kind and the Secret Service item; a second run adds nothing" kwl_kdewallet
    check "--kwallets: a wrong password is one line and not a success, the other wallet still comes; --all includes them" kwl_folder_and_wrong_password
    check "a GPG wallet, truncated, junk and oversized files: one line each, no password asked for GPG, at once" kwl_gpg_and_hostile_files
}
