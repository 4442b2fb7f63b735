# shellcheck shell=bash
# Cases of KWallet's D-Bus API as keychain-secret-service --kwallet answers it. Sourced by the
# KDE suite's runner (Tests/kde/run.sh), which provides Tests/lib.sh's check/expect/skip, `on_bus FUNCTION` (FUNCTION inside the case's
# own session bus, where the KWallet names are activatable), `answers` (the scripted pinentry's
# next answers), `confined APP COMMAND` (a Flatpak-like sandbox), `kde_client` (server_client.py)
# and KWALLET_TARGET (keychain, or kwalletd5 to hold the cases to KWallet's own behaviour).

kde_ours() { [ "$KWALLET_TARGET" = keychain ]; }
# The runner's python (Tests/lib.sh bus_suite_start sets it).
: "${py:?}"

# kwallet-query reads, changes and lists passwords and maps (it changes existing entries only, as
# KWallet's own does), and what it reads is what the keychain holds.
kwallet_query_passwords_and_maps() {
    kde_client seed kdewallet Passwords mail first
    expect first "$(kwallet-query -r mail -f Passwords kdewallet)" "kwallet-query reads"
    printf 'second' | kwallet-query -w mail -f Passwords kdewallet
    expect second "$(kwallet-query -r mail -f Passwords kdewallet)" "kwallet-query writes"
    kwallet-query -l -f Passwords kdewallet | grep -x mail > /dev/null
    kde_client seed_map "Form Data" login user=ann pass=x
    kwallet-query -v -r login -f "Form Data" kdewallet | grep '"user": *"ann"' > /dev/null
    # kwallet-query serializes the map with Qt's own QDataStream: the bytes must be Qt's.
    printf '{"user":"bob","pass":"y","zeta":"z"}' | kwallet-query -w login -f "Form Data" kdewallet
    kde_client read_map_bytes "Form Data" login user=bob pass=y zeta=z
    if kde_ours; then
        expect second "$(security find-generic-password -s Passwords -a mail -w)" "security sees the password"
        expect second "$(secret-tool lookup service Passwords username mail)" "the Secret Service sees it"
        secret-tool search --all kwallet.folder Passwords 2>&1 | grep -x 'label = Passwords/mail' > /dev/null
    fi
}

python_keyring_kwallet_backend() {
    "$py" - <<'PY'
import keyring.backends.kwallet as k
ring = k.DBusKeyring()
ring.set_password("svc.example", "ann", "kr-secret")
assert ring.get_password("svc.example", "ann") == "kr-secret"
ring.set_password("svc.example", "ann", "rotated")
assert ring.get_password("svc.example", "ann") == "rotated"
assert ring.get_credential("svc.example", None).password == "rotated"
ring.delete_password("svc.example", "ann")
assert ring.get_password("svc.example", "ann") is None
ring.set_password("svc.example", "bob", "kept")
PY
    expect kept "$(kwallet-query -r bob -f svc.example kdewallet)"
    if kde_ours; then
        expect kept "$(security find-generic-password -s svc.example -a bob -w)"
        expect kept "$(secret-tool lookup service svc.example username bob)"
    fi
}

binary_entries_maps_folders_rename() { kde_client entries; }

handles_are_the_connections() { kde_client handles; }

introspection_gives_the_signatures() { kde_client introspect; }

wallet_wide_methods_and_signals() { kde_client wallet_methods; }

# A password stored through the Secret Service as KWallet's entries are (service = folder,
# username = key) is an entry; one KWallet wrote changes through secret-tool.
secret_service_and_kwallet_share_entries() {
    kde_client seed kdewallet Passwords shared one
    printf 'two' | secret-tool store --label=Passwords/shared kwallet.folder Passwords kwallet.key shared kwallet.type password \
        service Passwords username shared
    expect two "$(kde_client read_password Passwords shared)" "KWallet reads the Secret Service's change"
    expect 1 "$(secret-tool search --all kwallet.key shared 2>&1 | grep -c '^label')" "one item"
}

kwallet_write_invalidates_items() { kde_client items_invalidated; }

opening_a_locked_wallet_prompts() {
    kde_client seed kdewallet Passwords mail locked-secret
    security lock-keychain
    answers CANCEL
    expect -1 "$(kde_client open_wallet kdewallet)" "a cancelled prompt"
    answers wrong pw
    handle=$(kde_client open_wallet kdewallet)
    [ "$handle" -gt 0 ]
    expect 3 "$(grep -cx GETPIN "$PINENTRY_LOG")" "asked once, cancelled; then twice"
    expect locked-secret "$(kwallet-query -r mail -f Passwords kdewallet)"
    security lock-keychain
    answers pw
    expect locked-secret "$(kwallet-query -r mail -f Passwords kdewallet)" "kwallet-query through the prompt"
    security lock-keychain
    answers pw
    [ "$(kde_client open_async kdewallet)" -gt 0 ]
}

# A program opening a locked wallet in a loop raises the Secret Service's 8 prompts per client,
# one dialog at a time, not one per call.
prompts_per_client_are_capped() {
    security lock-keychain
    : > "$PINENTRY_RUNS"
    answers CANCEL CANCEL CANCEL CANCEL CANCEL CANCEL CANCEL CANCEL CANCEL CANCEL
    expect "-1 -1 -1 -1 -1 -1 -1 -1 -1 -1" "$(kde_client open_many 10)" "every open refused"
    expect 8 "$(grep -cx start "$PINENTRY_RUNS")" "pinentry runs"
}

# kwalletd answers folderDoesNotExist and keyDoesNotExist from a closed wallet exactly, and KDE's
# programs (kpasswdserver, the form wallet) ask them so as not to raise the wallet's prompt for
# nothing: a locked keychain answers from its index, each program its own view, and no prompt.
does_not_exist_while_locked() {
    kde_client seed kdewallet Passwords mail kept
    kde_client make_folder "Empty Folder"
    local client asks mine app
    client="$(dirname "${BASH_SOURCE[0]}")/server_client.py"
    confined org.example.App "$py" "$client" seed kdewallet "App Folder" key app-secret
    # The app's view has the folders a new wallet has (Passwords, Form Data), as kwalletd's.
    asks='folder Passwords
folder "Empty Folder"
folder Nothing
folder "App Folder"
key Passwords mail
key Passwords other
key Nothing mail
key "App Folder" key'
    mine=$(kde_client does_not_exist "$asks")
    app=$(confined org.example.App "$py" "$client" does_not_exist "$asks")
    expect "false false true true false true true true" "$mine" "an unconfined program's answers"
    expect "false true true false true true true false" "$app" "the app's answers"
    security lock-keychain
    : > "$PINENTRY_RUNS"
    answers CANCEL CANCEL CANCEL CANCEL
    expect "$mine" "$(kde_client does_not_exist "$asks")" "an unconfined program's answers, locked"
    expect "$app" "$(confined org.example.App "$py" "$client" does_not_exist "$asks")" "the app's answers, locked"
    expect 0 "$(grep -cx start "$PINENTRY_RUNS")" "prompts"
    expect true "$(kde_client does_not_exist 'folder Passwords' 'kdewallet-none')" "a wallet that does not exist"
}

wallet_closes_when_the_keychain_locks() { kde_client closed_on_lock; }

a_missing_wallet_is_made_through_the_prompt() {
    answers CANCEL
    expect -1 "$(kde_client open_wallet Work)"
    [ ! -e "$XDG_DATA_HOME/keychains/Work.keychain-db" ]
    answers newpw newpw
    [ "$(kde_client open_wallet Work)" -gt 0 ]
    security lock-keychain "$XDG_DATA_HOME/keychains/Work.keychain-db"
    security unlock-keychain -p newpw "$XDG_DATA_HOME/keychains/Work.keychain-db"
    expect "Work kdewallet" "$(kde_client wallets)"
    expect -1 "$(kde_client open_wallet ../elsewhere)" "a name that is no keychain's"
    expect -1 "$(kde_client delete kdewallet)" "the login keychain is never deleted"
    answers newpw
    expect 0 "$(kde_client delete Work)"
    expect kdewallet "$(kde_client wallets)"
}

sandboxed_app_sees_its_own_entries() {
    kde_client seed kdewallet Passwords mail unconfined
    confined org.example.App "$py" "$(dirname "${BASH_SOURCE[0]}")/server_client.py" confined_view org.example.App
    expect unconfined "$(kde_client read_password Passwords mail)" "the unconfined entry stays"
    expect unconfined "$(security find-generic-password -s Passwords -a mail -w)"
}

# users() tells a sandboxed app its own holds only, not which other programs use the wallet.
sandboxed_app_sees_its_own_users() {
    local holder waited=0
    kde_client heard_folders "$HOME/held" 3 org.kde.kmail &
    holder=$!
    while [ ! -e "$HOME/held.ready" ] && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
    expect "org.kde.kmail other" "$(kde_client users_seen other)" "an unconfined caller sees every hold"
    expect org.example.App "$(confined org.example.App "$py" "$(dirname "${BASH_SOURCE[0]}")/server_client.py" users_seen org.example.App)"
    wait "$holder"
}

holds_per_connection_are_bounded() { kde_client holds_are_bounded; }

# folderUpdated and folderListUpdated go to the programs holding the wallet that see the folder:
# a sandboxed app hears its own folders only, an unconfined program no sandboxed app's.
sandboxed_apps_folder_names_stay_unheard() {
    local client listener app waited=0
    client="$(dirname "${BASH_SOURCE[0]}")/server_client.py"
    kde_client heard_folders "$HOME/heard" 60 org.kde.kmail &
    listener=$!
    confined org.example.App "$py" "$client" heard_folders "$HOME/heard-app" 60 org.example.App &
    app=$!
    while [ ! -e "$HOME/heard.ready" ] || [ ! -e "$HOME/heard-app.ready" ]; do
        [ $waited -lt 300 ] || break
        sleep 0.1
        waited=$((waited + 1))
    done
    confined org.example.App "$py" "$client" seed kdewallet "App Secret Folder" k v
    kde_client seed kdewallet "Unconfined Folder" k v
    kde_client make_folder "Unconfined Empty Folder"
    touch "$HOME/heard.stop" "$HOME/heard-app.stop"
    wait "$listener" "$app"
    grep -qx "folderUpdated kdewallet App Secret Folder" "$HOME/heard-app" || { echo "the app did not hear its own folder: $(cat "$HOME/heard-app")"; return 1; }
    grep -qx "folderUpdated kdewallet Unconfined Folder" "$HOME/heard" || { echo "the holder did not hear the folder: $(cat "$HOME/heard")"; return 1; }
    grep -qx "folderListUpdated kdewallet" "$HOME/heard" || { echo "the holder did not hear the folder list: $(cat "$HOME/heard")"; return 1; }
    if grep "App Secret Folder" "$HOME/heard"; then echo "a sandboxed app's folder name reached another program"; return 1; fi
    if grep -e "Unconfined" -e folderListUpdated "$HOME/heard-app"; then echo "a sandboxed app heard another program's folders"; return 1; fi
}

local_and_network_wallet_from_kwalletrc() {
    expect "kdewallet kdewallet" "$(kde_client defaults)"
    mkdir -p "$XDG_CONFIG_HOME"
    printf '[Wallet]\nDefault Wallet=main\nLocal Wallet=mine\nUse One Wallet=false\n' > "$XDG_CONFIG_HOME/kwalletrc"
    expect "mine main" "$(kde_client defaults)"
}

# With another provider holding org.freedesktop.secrets, --kwallet serves the KWallet names alone.
kwallet_names_alone_beside_another_provider() {
    "$py" -c 'import dbus,time,sys; b=dbus.SessionBus(); b.request_name("org.freedesktop.secrets"); print("held", flush=True); time.sleep(60)' \
        > "$HOME/other" &
    other=$!
    for _ in $(seq 50); do grep -q held "$HOME/other" && break; sleep 0.1; done
    ! keychain-secret-service 2> "$HOME/plain.log"
    keychain-secret-service --kwallet 2> "$HOME/kwallet.log" &
    service=$!
    kde_client wait_owned org.kde.kwalletd6 "$service"
    expect 1 "$(wc -l < "$HOME/kwallet.log")" "one line: $(cat "$HOME/kwallet.log")"
    grep -q 'serving org.kde.kwalletd5 and org.kde.kwalletd6 alone' "$HOME/kwallet.log"
    kde_client seed kdewallet Passwords alone yes
    expect yes "$(kwallet-query -r alone -f Passwords kdewallet)"
    # A second one has no name left to take.
    ! timeout 10 keychain-secret-service --kwallet 2> /dev/null
    kill "$service" "$other"
}

# --replace stops another keychain-secret-service of the user, which lets none of its names go
# (review 55: the name is no other process's to take): its KWallet names go with it, and a
# --kwallet replacer serves them.
replace_stops_the_other_service() {
    keychain-secret-service --kwallet 2> "$HOME/first.log" &
    first=$!
    kde_client wait_owned org.kde.kwalletd5 "$first"
    kde_client seed kdewallet Passwords mail kept
    keychain-secret-service --replace --kwallet 2> "$HOME/second.log" &
    second=$!
    kde_client wait_owned org.freedesktop.secrets "$second"
    kde_client wait_owned org.kde.kwalletd5 "$second"
    wait "$first" || :
    grep -q 'org.freedesktop.secrets is provided by keychain-secret-service (pid [0-9]*); asking it to end (--replace)' "$HOME/second.log"
    expect kept "$(kwallet-query -r mail -f Passwords kdewallet)" "the second serves KWallet"
    kill "$second"
}

kde_server_cases() {
    check "kwallet-query reads, writes and lists passwords and maps (Qt's own map bytes)" on_bus kwallet_query_passwords_and_maps
    check "python-keyring's KWallet backend sets, gets and deletes" on_bus python_keyring_kwallet_backend
    check "binary entries, maps, passwords, folders, rename, remove, patterns: kwalletd's answers" on_bus binary_entries_maps_folders_rename
    check "a handle holds for its connection and appid only; holds go with the connection" on_bus handles_are_the_connections
    check "Introspect gives kwalletd's signatures (open's wId is x, both writeEntry)" on_bus introspection_gives_the_signatures
    check "disconnectApplication, closeAllWallets, sync, reconfigure, openPath; their signals" on_bus wallet_wide_methods_and_signals
    check "localWallet and networkWallet follow kwalletrc" on_bus local_and_network_wallet_from_kwalletrc
    if kde_ours; then
        check "the Secret Service and KWallet see one entry" on_bus secret_service_and_kwallet_share_entries
        check "a KWallet write invalidates the collection's Items for Secret Service clients" on_bus kwallet_write_invalidates_items
        check "a locked wallet opens through the keychain's prompt; cancel is -1" on_bus opening_a_locked_wallet_prompts
        check "a locked wallet opened in a loop: at most 8 prompts per client" on_bus prompts_per_client_are_capped
        check "security lock-keychain closes the wallet: walletClosedId" on_bus wallet_closes_when_the_keychain_locks
        check "folderDoesNotExist and keyDoesNotExist on a locked keychain: exact, from the index, no prompt" on_bus does_not_exist_while_locked
        check "a missing wallet is made through the prompt; the login keychain is never deleted" on_bus a_missing_wallet_is_made_through_the_prompt
        check "--replace stops another keychain-secret-service; a --kwallet replacer serves both APIs" on_bus replace_stops_the_other_service
        check "--kwallet beside another Secret Service: the KWallet names alone, one line" on_bus kwallet_names_alone_beside_another_provider
        check "one connection holds the wallet under at most 256 appids" on_bus holds_per_connection_are_bounded
        if command -v bwrap >/dev/null; then
            check "a sandboxed app sees and writes its own entries only" on_bus sandboxed_app_sees_its_own_entries
            check "folderUpdated and folderListUpdated reach the holders that see the folder only" on_bus sandboxed_apps_folder_names_stay_unheard
            check "users() tells a sandboxed app its own holds only" on_bus sandboxed_app_sees_its_own_users
        else
            skip "bwrap (bubblewrap) is not installed: the sandboxed app's case"
        fi
    else
        skip "kwalletd5: the keychain's own cases (Secret Service view, prompt, wallet made, name, sandbox)"
    fi
}
