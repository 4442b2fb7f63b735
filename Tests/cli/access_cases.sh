# shellcheck shell=bash
# shellcheck disable=SC2154 # security and case_dir are set by run.sh, which sources this file
# Access lists as they are set and shown (issue 54): add-* -T/-A, the partition-list commands,
# `security access`, dump-keychain -a and find --access. No broker runs here: these cases check
# the lists as stored, not who gets the secret.

# The access block of the item `security access` selects.
list_of() { "$security" access "$@" | sed -n '/^access:/,$p'; }

add_writes_the_list() {
    make_keychain
    "$security" add-generic-password -a a -s default -w x
    expect $'access: 1 entries\n    entry 0: apple-tool:' "$(list_of -a a -s default)" "without -T or -A: the security tool (keychain_add.c)"
    ln -s /bin/true "$case_dir/linked"
    cp /bin/true "$case_dir/tool"
    "$security" add-generic-password -a a -s twice -w x -T /bin/true -T "$case_dir/tool" -T "$case_dir/linked"
    expect $'access: 2 entries\n    entry 0: exe:/usr/bin/true\n    entry 1: exe:'"$case_dir/tool" "$(list_of -a a -s twice)" "-T resolved (realpath): a link to a listed program adds nothing"
    "$security" add-generic-password -a a -s none -w x -T ""
    expect "access: 0 entries" "$(list_of -a a -s none)" '-T "": no program trusted'
    "$security" add-generic-password -a a -s any -w x -A
    expect $'access: 1 entries\n    entry 0: any' "$(list_of -a a -s any)" "-A: any program"
    "$security" add-internet-password -a a -s h.example -r htps -w x -T /bin/true
    expect $'access: 1 entries\n    entry 0: exe:/usr/bin/true' "$(list_of --internet -a a -s h.example)"
    expect $'access: 1 entries\n    entry 0: exe:/usr/bin/true' "$(list_of -a a -s h.example -r htps)" "-r selects an internet password"
    # -U keeps the list unless -A or -T says otherwise; a -U that adds gets the default.
    "$security" add-generic-password -U -a a -s twice -w y
    expect $'access: 2 entries\n    entry 0: exe:/usr/bin/true\n    entry 1: exe:'"$case_dir/tool" "$(list_of -a a -s twice)" "-U without -T: the old list"
    expect y "$("$security" find-generic-password -a a -s twice -w)"
    "$security" add-generic-password -U -a a -s twice -w z -T ""
    expect "access: 0 entries" "$(list_of -a a -s twice)" "-U -T: the new list"
    "$security" add-generic-password -U -a a -s fresh -w z
    expect $'access: 1 entries\n    entry 0: apple-tool:' "$(list_of -a a -s fresh)"
}

# keychain_add.c: SecTrustedApplicationCreateFromPath's error and status 1, nothing stored.
add_refuses_bad_programs() {
    make_keychain
    out=$("$security" add-generic-password -a a -s s -w x -T /no/such/program 2>&1) && return 1
    grep -q 'SecTrustedApplicationCreateFromPath /no/such/program: No such file or directory' <<< "$out"
    expect 1 "$(status_of "$security" add-generic-password -a a -s s -w x -T /no/such/program)"
    expect 1 "$(status_of "$security" add-internet-password -a a -s h.example -w x -T /bin/true -T /no/such)"
    expect 1 "$(status_of "$security" add-generic-password -a a -s s -w x -T Safari.app)" "a bundle's name is not a path"
    grep -q "Safari.app: not a program's path" <<< "$("$security" add-generic-password -a a -s s -w x -T Safari.app 2>&1)"
    expect 1 "$(status_of "$security" add-generic-password -a a -s s -w x -T /tmp)" "a directory is no program"
    expect 2 "$(status_of "$security" add-generic-password -a a -s s -w x -T)" "-T without a value: usage"
    expect 44 "$(status_of "$security" find-generic-password -a a -s s)" "nothing was stored"
    expect 44 "$(status_of "$security" find-internet-password -s h.example)"
}

access_grants_and_revokes() {
    make_keychain
    "$security" add-generic-password -a a -s s -w x
    list_of -a a -s s --grant /bin/true > /dev/null
    expect $'access: 2 entries\n    entry 0: apple-tool:\n    entry 1: exe:/usr/bin/true' "$(list_of -a a -s s --list)"
    list_of -a a -s s --grant flatpak:org.example.App > /dev/null
    list_of -a a -s s --grant exe:/bin/true > /dev/null
    expect 3 "$("$security" access -a a -s s | grep -c '^    entry')" "granted twice, listed once"
    # An interpreter runs any script: refused unless asked for as one.
    python=$(realpath /usr/bin/python3)
    out=$("$security" access -a a -s s --grant /usr/bin/python3 2>&1) && return 1
    grep -q -- "--interpreter" <<< "$out"
    expect 206 "$(status_of "$security" access -a a -s s --grant /usr/bin/python3)"
    expect 206 "$(status_of "$security" access -a a -s s --grant exe:/bin/sh)" "exe: spelling too"
    list_of -a a -s s --grant /usr/bin/python3 --interpreter | grep -qx "    entry 3: interpreter:$python"
    list_of -a a -s s --revoke /usr/bin/python3 > /dev/null
    list_of -a a -s s --revoke apple-tool: > /dev/null
    expect $'access: 2 entries\n    entry 0: exe:/usr/bin/true\n    entry 1: flatpak:org.example.App' "$(list_of -a a -s s)"
    "$security" access -a a -s s --revoke snap:nothing 2>&1 | grep -q "was not in the item's list"
    expect 206 "$(status_of "$security" access -a a -s s --grant Safari)" "a name is neither a path nor an entry"
    expect 206 "$(status_of "$security" access -a a -s s --grant /no/such)"
    expect 2 "$(status_of "$security" access --grant /bin/true)" "no item named"
    expect 2 "$(status_of "$security" access -a a -s s --grant /bin/true --revoke any)" "one action"
    expect 44 "$(status_of "$security" access -a nobody -s s --list)"
    expect 44 "$(status_of "$security" access -a a -s s --grant /bin/true -r htps)" "-r: an internet password, and there is none"
}

access_by_program() {
    make_keychain
    make_keychain other
    "$security" add-generic-password -a a -s one -w x -T /bin/true
    "$security" add-generic-password -a a -s two -w x -T /bin/true -T /bin/false
    "$security" add-internet-password -a a -s h.example -w x -T /bin/true
    "$security" add-generic-password -a a -s three -w x -T /bin/true "$XDG_DATA_HOME/keychains/other.keychain-db"
    "$security" add-generic-password -a a -s untouched -w x -T /bin/false
    expect 4 "$("$security" access --program /bin/true --list | grep -c '^class:')" "the search list: login and other"
    expect 1 "$("$security" access --program /usr/bin/true --list other.keychain-db | grep -c '^class:')"
    "$security" access --program /bin/true --revoke login.keychain-db 2> "$case_dir/err" > /dev/null
    grep -q "/usr/bin/true removed from 3 item(s)" "$case_dir/err"
    expect "" "$("$security" access --program /bin/true --list login.keychain-db)" "revoked everywhere in login"
    expect $'access: 1 entries\n    entry 0: exe:/usr/bin/false' "$(list_of -a a -s two)"
    expect "access: 0 entries" "$(list_of -a a -s one)"
    expect 1 "$("$security" access --program /bin/true --list | grep -c '^class:')" "the other keychain was not named"
    expect 2 "$(status_of "$security" access --program /bin/true --grant /bin/true)"
    expect 2 "$(status_of "$security" access --program /bin/true -s one)"
}

lists_shown_only_when_asked() {
    make_keychain
    "$security" add-generic-password -a a -s s -w x -T /bin/true
    "$security" add-internet-password -a a -s h.example -w x
    for out in "$("$security" find-generic-password -a a -s s)" "$("$security" find-internet-password -s h.example)" \
        "$("$security" dump-keychain)" "$("$security" dump-keychain -d)"; do
        if grep -q 'tapp\|^access:' <<< "$out"; then echo "a list in default output: $out"; return 1; fi
    done
    "$security" find-generic-password -a a -s s --access | grep -qx '    entry 0: exe:/usr/bin/true'
    "$security" find-internet-password -s h.example --access | grep -qx '    entry 0: apple-tool:'
    expect 2 "$("$security" dump-keychain -a | grep -c '^access: 1 entries')" "dump-keychain -a: each item's list"
    if "$security" dump-keychain -a | grep -q tapp; then return 1; fi
    expect 2 "$("$security" dump-keychain -i | grep -c '^access: 1 entries')" "-i shows them too (keychain_dump)"
}

# An item from before lists (here: imported by import-secrets, which writes none) shows no list;
# its first list starts from what the broker takes it to trust: an internet password, the git and
# docker helpers under their own programs.
legacy_items_start_from_their_front_end() {
    make_keychain
    printf 'https://alice:s3cret@git.example.org\n' > "$HOME/.git-credentials"
    "$security" import-secrets --git-credentials > /dev/null
    expect "access: no list (made before access lists, or imported: the program its kind names uses it, others are asked)" \
        "$(list_of --internet -s git.example.org)"
    list_of --internet -s git.example.org --grant /bin/true > /dev/null
    local listed
    listed=$(list_of --internet -s git.example.org)
    grep -q '^access: 5 entries$' <<< "$listed"
    grep -q '^    entry 0: exe:/usr/bin/git-credential-keychain</usr/bin/git,' <<< "$listed"
    grep -q '^    entry 2: exe:/usr/bin/docker-credential-keychain</usr/bin/docker,' <<< "$listed"
    grep -q '^    entry 4: exe:/usr/bin/true$' <<< "$listed"
}
