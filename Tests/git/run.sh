#!/usr/bin/env bash
# git-credential-keychain driven by real git (credential fill/approve/reject, clone and push over
# HTTP with basic auth), and by git's protocol fed to it directly for what this git (2.39) does not
# send yet (expiry, refresh tokens, capabilities). Each case has its own HOME, XDG folders and
# keychain; git runs with GIT_CONFIG_NOSYSTEM=1 so the machine's /etc/gitconfig is never read.
set -uo pipefail
bin=$(realpath "${1:-.build/debug}")
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$bin:$PATH" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
. "$here/../lib.sh"

fresh() {
    case_dir=$(mktemp -d /tmp/git-credential-XXXXXX)
    export HOME=$case_dir XDG_DATA_HOME=$case_dir/data XDG_CONFIG_HOME=$case_dir/config
    unset KEYCHAIN_PATH GIT_ASKPASS SSH_ASKPASS
    printf 'pw\n' | security create-keychain
    git config --global credential.helper keychain
}

finish() {
    security delete-keychain login >/dev/null 2>&1
    [ -n "${server_pid:-}" ] && kill "$server_pid" 2>/dev/null
    server_pid=
    rm -rf "$case_dir"
}



approve() { printf '%s\n' "$@" "" | git credential approve; }
reject() { printf '%s\n' "$@" "" | git credential reject; }
fill() { printf '%s\n' "$@" "" | git credential fill 2>/dev/null; }
field() { sed -n "s/^$1=//p"; }
helper() { local action=$1; shift; printf '%s\n' "$@" "" | git-credential-keychain "$action"; }

# --- cases ---------------------------------------------------------------------------------

# The helper's new items trust it only under git (exe:HELPER<git's programs); a credential
# stored before keeps its list when git stores it again.
helper_items_list() {
    approve protocol=https host=example.com username=alice password=s3cret
    list=$(security access --internet -s example.com | sed -n 's/^    entry 0: //p')
    expect "exe:$(realpath "$bin/git-credential-keychain")<" "${list%%<*}<" "the helper's own resolved path"
    for parent in /usr/bin/git /usr/lib/git-core/git /usr/lib/git-core/git-remote-https /usr/local/bin/git; do
        grep -q "[<,]$parent\(,\|\$\)" <<< "$list" || { echo "no $parent in $list"; return 1; }
    done
    security access --internet -s example.com --grant /bin/true > /dev/null
    approve protocol=https host=example.com username=alice password=rotated
    expect 2 "$(security access --internet -s example.com | grep -c '^    entry')" "an update keeps the list"
}

approve_fill_reject() {
    approve protocol=https host=example.com username=alice password=s3cret
    expect s3cret "$(security find-internet-password -s example.com -r htps -w)" "security sees what git stored"
    out=$(fill protocol=https host=example.com)
    expect alice "$(echo "$out" | field username)"
    expect s3cret "$(echo "$out" | field password)"
    # store updates in place: one item, the new password.
    approve protocol=https host=example.com username=alice password=rotated
    expect rotated "$(fill protocol=https host=example.com | field password)"
    expect 1 "$(security dump-keychain | grep -c '^class: "inet"')" "no duplicate after a second store"
    # reject with a stale password leaves the item; with the right one removes it.
    reject protocol=https host=example.com username=alice password=stale
    expect rotated "$(fill protocol=https host=example.com | field password)"
    reject protocol=https host=example.com username=alice password=rotated
    ! fill protocol=https host=example.com
}

security_and_git_share_items() {
    security add-internet-password -a bob -s git.example.org -r htps -w from-security
    out=$(fill protocol=https host=git.example.org)
    expect bob "$(echo "$out" | field username)"
    expect from-security "$(echo "$out" | field password)"
}

protocols_do_not_mix() {
    approve protocol=https host=example.com username=a password=https-pw
    ! fill protocol=http host=example.com
    approve protocol=http host=example.com username=a password=http-pw
    expect https-pw "$(fill protocol=https host=example.com | field password)"
    expect http-pw "$(fill protocol=http host=example.com | field password)"
    approve protocol=imaps host=mail.example.com username=m password=imap-pw
    expect imap-pw "$(security find-internet-password -s mail.example.com -r imps -w)" "imaps is Apple's imps"
    approve protocol=cert host=store.example password=certpw username=c
    expect certpw "$(fill protocol=cert host=store.example | field password)" "unknown schemes are kept"
}

ports() {
    approve protocol=https host=example.com:8443 username=a password=on-8443
    expect on-8443 "$(security find-internet-password -s example.com -P 8443 -w)"
    ! fill protocol=https host=example.com:9999
    expect on-8443 "$(fill protocol=https host=example.com:8443 | field password)"
    expect on-8443 "$(fill protocol=https host=example.com | field password)" "no port in the request is a wildcard"
}

use_http_path() {
    git config --global credential.useHttpPath true
    approve protocol=https host=example.com path=org/one.git username=a password=one
    approve protocol=https host=example.com path=org/two.git username=a password=two
    expect one "$(fill protocol=https host=example.com path=org/one.git | field password)"
    expect two "$(fill protocol=https host=example.com path=org/two.git | field password)"
    ! fill protocol=https host=example.com path=org/three.git
    security find-internet-password -s example.com -p org/one.git >/dev/null
    git config --global credential.useHttpPath false
    # Without useHttpPath git sends no path: any stored path matches, the newest wins.
    expect two "$(fill protocol=https host=example.com | field password)"
}

two_users_one_host() {
    approve protocol=https host=example.com username=alice password=alice-pw
    sleep 1.1
    approve protocol=https host=example.com username=bob password=bob-pw
    expect alice-pw "$(fill protocol=https host=example.com username=alice | field password)"
    expect bob-pw "$(fill protocol=https host=example.com username=bob | field password)"
    expect bob "$(fill protocol=https host=example.com | field username)" "the most recently modified wins"
    sleep 1.1
    approve protocol=https host=example.com username=alice password=alice-new
    expect alice "$(fill protocol=https host=example.com | field username)"
    reject protocol=https host=example.com username=bob password=bob-pw
    expect alice-new "$(fill protocol=https host=example.com | field password)"
}

ipv6_hosts() {
    approve protocol=http 'host=[::1]:8080' username=v6 password=p6
    out=$(fill protocol=http 'host=[::1]:8080')
    expect p6 "$(echo "$out" | field password)"
    expect '[::1]:8080' "$(echo "$out" | field host)"
    expect p6 "$(security find-internet-password -s ::1 -P 8080 -w)"
    ! fill protocol=http 'host=[::1]:8081'
    approve protocol=https 'host=[fe80::1]' username=v6b password=p6b
    expect p6b "$(fill protocol=https 'host=[fe80::1]' | field password)"
}

long_lines() {
    long=$(head -c 60000 /dev/zero | tr '\0' 'x')
    approve protocol=https host=example.com username="$long" password=p-long path=repo
    out=$(fill protocol=https host=example.com)
    expect 60000 "$(echo "$out" | field username | tr -d '\n' | wc -c)"
    expect p-long "$(echo "$out" | field password)"
    longpw=$(head -c 60000 /dev/zero | tr '\0' 'p')
    approve protocol=https host=long.example username=u password="$longpw"
    expect 60000 "$(fill protocol=https host=long.example | field password | tr -d '\n' | wc -c)"
}

# Issue 20, point 12: a request past the bound (1 MiB) is refused without being read whole, and
# nothing is stored; one just under it still works.
oversized_requests() {
    local out
    out=$(/usr/bin/python3 - "$bin/git-credential-keychain" <<'PY'
import subprocess, sys
helper = sys.argv[1]
p = subprocess.Popen([helper, "store"], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
sent = 0
chunk = b"protocol=https\nhost=big.example\nusername=u\npassword=" + b"x" * (1 << 20)
try:
    p.stdin.write(chunk)
    sent = len(chunk)
    for _ in range(400):            # up to 400 MB more, if the helper kept reading
        p.stdin.write(b"x" * (1 << 20))
        sent += 1 << 20
    p.stdin.close()
except BrokenPipeError:
    pass
err = p.stderr.read().decode()
p.wait()
print(f"{p.returncode} {sent < 64 << 20} {err.strip()}")
PY
)
    expect "0 True git-credential-keychain: the request is larger than 1048576 bytes; refused, nothing stored" "$out" \
        "status, stopped reading early, the error line"
    expect "" "$(fill protocol=https host=big.example username=u | field password)" "nothing stored"
    expect 44 "$(status_of security find-internet-password -s big.example)"
    near=$(head -c 1000000 /dev/zero | tr '\0' 'n')
    helper store protocol=https host=near.example username=u password="$near"
    expect 1000000 "$(helper get protocol=https host=near.example | field password | tr -d '\n' | wc -c)"
}

expiry_and_refresh_tokens() {
    # git 2.39 does not pass these yet; newer git sends exactly these lines to the helper.
    now=$(date +%s)
    helper store protocol=https host=example.com username=a password=fresh "password_expiry_utc=$((now + 3600))" oauth_refresh_token=refresh-1
    out=$(helper get protocol=https host=example.com)
    expect fresh "$(echo "$out" | field password)"
    expect $((now + 3600)) "$(echo "$out" | field password_expiry_utc)"
    expect refresh-1 "$(echo "$out" | field oauth_refresh_token)"
    # Several lines are not plain text, so -w prints hex, as macOS does.
    first=$(security find-internet-password -s example.com -w | python3 -c 'import sys; print(bytes.fromhex(sys.stdin.read().strip()).decode().splitlines()[0])')
    expect fresh "$first" "the password is the secret's first line"
    helper store protocol=https host=example.com username=a password=stale "password_expiry_utc=$((now - 10))" oauth_refresh_token=refresh-2
    expect "" "$(helper get protocol=https host=example.com)" "an expired password is not returned"
    helper store protocol=https host=other.example username=a password=plain
    expect "" "$(helper get protocol=https host=other.example | field oauth_refresh_token)"
}

capabilities() {
    # authtype/credential only with the capability announced, and echoed back only then.
    helper store capability[]=authtype protocol=https host=api.example authtype=Bearer credential=tok-1
    expect "" "$(helper get protocol=https host=api.example)" "old git gets nothing it cannot use"
    out=$(helper get capability[]=authtype protocol=https host=api.example)
    expect "capability[]=authtype" "$(echo "$out" | head -1)"
    expect Bearer "$(echo "$out" | field authtype)"
    expect tok-1 "$(echo "$out" | field credential)"
    # Ephemeral credentials are not kept.
    helper store capability[]=authtype protocol=https host=eph.example authtype=Bearer credential=short ephemeral=1
    expect "" "$(helper get capability[]=authtype protocol=https host=eph.example)"
    # Unknown keys, wwwauth[], state[] and continue are accepted and ignored.
    helper store protocol=https host=x.example username=u password=p 'wwwauth[]=Basic realm="x"' state[]=a:b continue=1 future_key=1
    out=$(helper get protocol=https host=x.example 'wwwauth[]=Basic realm="x"' state[]=a:b)
    expect p "$(echo "$out" | field password)"
    ! grep -q state <<< "$out"
}

quiet_and_locked() {
    # Nothing matched: nothing on stdout or stderr, exit 0.
    expect "" "$(helper get protocol=https host=none.example 2>&1)"
    helper store protocol=https host=example.com username=a password=p 2>"$case_dir/err"
    helper get protocol=https host=example.com >/dev/null 2>>"$case_dir/err"
    helper erase protocol=https host=example.com 2>>"$case_dir/err"
    expect "" "$(cat "$case_dir/err")" "no stderr when all is well"
    helper store protocol=https host=example.com username=a password=p
    security lock-keychain
    out=$(helper get protocol=https host=example.com 2>"$case_dir/err" </dev/null)
    expect "" "$out" "locked: nothing on stdout"
    expect 1 "$(wc -l < "$case_dir/err")"
    grep -q 'security unlock-keychain' "$case_dir/err"
    # git then asks the user; with prompts disabled it fails rather than hang.
    ! fill protocol=https host=example.com
    printf 'pw\n' | security unlock-keychain
    expect p "$(fill protocol=https host=example.com | field password)"
    # Unknown actions are ignored, as the protocol asks.
    git-credential-keychain frobnicate </dev/null
    ! git-credential-keychain </dev/null 2>/dev/null
}

clone_and_push_over_http() {
    root=$case_dir/srv
    mkdir -p "$root"
    git init -q --bare -b main "$root/repo.git"
    git -C "$root/repo.git" config http.receivepack true
    seed=$case_dir/seed
    git init -q -b main "$seed"
    git -C "$seed" -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m first
    git -C "$seed" push -q "$root/repo.git" main
    python3 "$here/http_git_server.py" "$root" gituser 'http s3cret' "$case_dir/port" 120 2>"$case_dir/http.log" &
    server_pid=$!
    for _ in $(seq 50); do [ -s "$case_dir/port" ] && break; sleep 0.1; done
    url="http://127.0.0.1:$(cat "$case_dir/port")/repo.git"

    # First clone: git asks (GIT_ASKPASS), then stores through the helper.
    cat > "$case_dir/askpass" <<ASK
#!/bin/sh
echo "\$1" >> "$case_dir/asked"
case "\$1" in Username*) echo gituser ;; *) echo 'http s3cret' ;; esac
ASK
    chmod +x "$case_dir/askpass"
    GIT_ASKPASS=$case_dir/askpass git clone -q "$url" "$case_dir/one"
    expect 2 "$(wc -l < "$case_dir/asked")" "asked for username and password once"
    expect 'http s3cret' "$(security find-internet-password -s 127.0.0.1 -w)"

    # Second clone and a push: nothing is asked, the keychain answers.
    rm "$case_dir/asked"
    GIT_ASKPASS=$case_dir/askpass git clone -q "$url" "$case_dir/two"
    git -C "$case_dir/two" -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m second
    GIT_ASKPASS=$case_dir/askpass git -C "$case_dir/two" push -q origin main
    [ ! -e "$case_dir/asked" ]
    expect second "$(git -C "$root/repo.git" log -1 --format=%s main)"

    # A wrong stored password: the server refuses, git rejects it and the helper erases it.
    security delete-internet-password -s 127.0.0.1 >/dev/null
    printf 'protocol=http\nhost=127.0.0.1:%s\nusername=gituser\npassword=wrong\n\n' "$(cat "$case_dir/port")" | git credential approve
    ! git clone -q "$url" "$case_dir/three" 2>/dev/null
    ! security find-internet-password -s 127.0.0.1 >/dev/null 2>&1
}

check "approve, fill, reject" approve_fill_reject
check "new items trust the helper under git only (issue 54)" helper_items_list
check "security and git share items" security_and_git_share_items
check "protocols never match each other" protocols_do_not_mix
check "ports" ports
check "credential.useHttpPath on and off" use_http_path
check "two users on one host" two_users_one_host
check "IPv6 hosts" ipv6_hosts
check "60 KB lines" long_lines
check "requests past 1 MiB refused early, nothing stored" oversized_requests
check "expiry and refresh tokens" expiry_and_refresh_tokens
check "capabilities, ephemeral, ignored keys" capabilities
check "quiet when well, one line when locked" quiet_and_locked
check "clone and push over HTTP with basic auth" clone_and_push_over_http

summary
