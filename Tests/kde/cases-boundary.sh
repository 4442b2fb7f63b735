# shellcheck shell=bash disable=SC2154 # case_dir, here, py, started come from the runner
# KWallet's API with a broker keeping the keychain (issue 55): keychain-secret-service --kwallet
# names each client to the broker, so an entry trusts the program that stored it, another
# program is asked (deny: no secret), and a sandboxed app keeps to its own entries. Sourced by
# Tests/kde/run.sh (check, expect, skip, on_bus, confined, kde_client, wait_for_owner). The
# suite's broker (Tests/broker-lib.sh) is started once, by kde_boundary_cases; the stand-in
# answerer appends each question to $broker_dir/questions and answers per $broker_dir/answer.mode.

boundary_answer_with() { echo "$1" > "$broker_dir/answer.mode"; rm -f "$broker_dir/questions"; }
boundary_not_asked() { [ ! -e "$broker_dir/questions" ] || { echo "asked:"; cat "$broker_dir/questions"; return 1; }; }

# The service's copy (root's, under /run: the broker identifies it) with KWallet's names.
boundary_service() {
    export KEYCHAIN_BROKER_SOCKET=$broker_socket KEYCHAIN_ACCESS_ANSWERER=$broker_dir/bin/answer
    printf 'pw\n' | security create-keychain > /dev/null
    "$broker_dir/bin/keychain-secret-service" --kwallet 2>> "$case_dir/service.log" &
    service=$!
    started+=("$service")
    wait_for_owner org.kde.kwalletd5 "$service"
}

kwallet_clients_are_asked() {
    boundary_service
    boundary_answer_with deny
    kde_client seed kdewallet Passwords mine first
    kde_client seed kdewallet Passwords theirs python-secret
    # kwallet-query writes existing entries only: over python's, which then trusts kwallet-query
    # (a writer the list does not name gets its own list). The old value it compares with is
    # asked about, and denied: the write goes on.
    printf 'by-query' | kwallet-query -w mine -f Passwords kdewallet
    security find-generic-password -s Passwords -a mine --access | grep -qx '    entry 0: exe:/usr/bin/kwallet-query'
    boundary_answer_with deny
    expect by-query "$(kwallet-query -r mine -f Passwords kdewallet)" "kwallet-query reads what it stored"
    boundary_not_asked
    expect "" "$(kwallet-query -r theirs -f Passwords kdewallet 2> /dev/null)" "another program's entry, denied"
    grep -F "kwallet-query (/usr/bin/kwallet-query)" "$broker_dir/questions"
    grep -F '"Passwords/theirs"' "$broker_dir/questions"
    grep -F "through keychain-secret-service" "$broker_dir/questions"
    # python-keyring's backend: what it stores it reads back silently; kwallet-query's it may not.
    boundary_answer_with deny
    "$py" -c '
import keyring.backends.kwallet as k
ring = k.DBusKeyring()
ring.set_password("svc.example", "ann", "kr-secret")
assert ring.get_password("svc.example", "ann") == "kr-secret"'
    boundary_not_asked
    expect "" "$(kde_client read_password Passwords mine)" "python reading kwallet-query's entry, denied"
    grep -F '"Passwords/mine"' "$broker_dir/questions"
    # A sandboxed app: its own entry, not relayed, never asked; the others' entries are not its.
    boundary_answer_with deny
    confined org.example.App "$py" "$here/server_client.py" seed kdewallet "App Folder" key app-secret
    expect app-secret "$(confined org.example.App "$py" "$here/server_client.py" read_password "App Folder" key org.example.App)" \
        "the app's own entry"
    expect "" "$(confined org.example.App "$py" "$here/server_client.py" read_password Passwords theirs org.example.App)" \
        "another program's entry is not the app's"
    boundary_not_asked
}

# The broker, started by the first case's set-up (kde_boundary_setup, also under KDE_ONLY); its
# user, folder and state go when the suite ends.
boundary_broker_start() {
    # shellcheck source=Tests/broker-lib.sh
    . "$here/../broker-lib.sh"
    trap broker_teardown EXIT
    broker_setup "kckde$$" kckde && broker_start_for_service "$bin"
}

kde_boundary_setup() {
    if [ -z "${broker_socket:-}" ]; then boundary_broker_start > "$case_dir/broker-start.log" 2>&1 || cat "$case_dir/broker-start.log"; fi
}

kde_boundary_cases() {
    if [ "$KWALLET_TARGET" != keychain ] || [ "$(id -u)" != 0 ] || ! command -v setpriv > /dev/null || ! command -v bwrap > /dev/null; then
        skip "the broker's KWallet case needs the keychain's service, root, setpriv and bwrap"
        return
    fi
    check "with a broker: kwallet-query and python-keyring read their own entries silently, another's only when allowed; a sandboxed app its own" \
        on_bus kwallet_clients_are_asked
}
