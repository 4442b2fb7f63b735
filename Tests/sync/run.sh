#!/usr/bin/env bash
# Sync of synchronizable items (issue 30) between three simulated machines: three throwaway users,
# each with its own keychain and kernel keyring, sharing one bare repository under a temporary
# folder. The cases build on each other (one group, set up by the first), in this order.
#
# "Acknowledged" (the loop case): a write is acknowledged when the `security sync now` after it
# returned 0. No acknowledged write may be lost silently: at the end both machines hold the same
# value, that of the latest write (no write started after it had finished); every other
# acknowledged write was overwritten by a write that started after it ended, or lost to one that
# may be dated later (the final one, which had not finished when it started) with the conflict in
# a machine's log (`security sync status`).
set -uo pipefail
bin=$(realpath "${1:-.build/debug}")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
# shellcheck source=Tests/broker-lib.sh
. "$here/../broker-lib.sh"
loop_seconds=${SYNC_LOOP_SECONDS:-60}

if [ "$(id -u)" != 0 ]; then
    skip "the sync suite makes three users, and needs root"
    summary
    exit 0
fi
if ! command -v git >/dev/null || ! command -v keyctl >/dev/null; then
    skip "the sync suite needs git and keyctl"
    summary
    exit 0
fi

base=$(mktemp -d /tmp/sync-suite-XXXXXX)
chmod 755 "$base"
users=(kcsyncA kcsyncB kcsyncC kcsyncD kcsyncE)
# The broker's user is named here too: the cleanup removes one a case left.
broker_user=kcsyncbrk
cleanup() {
    local u
    broker_teardown
    for u in "${users[@]}"; do
        if id "$u" >/dev/null 2>&1; then
            setpriv --reuid="$u" --regid="$u" --init-groups keyctl session - sh -c 'keyctl clear "$(keyctl get_persistent @s)"' >/dev/null 2>&1
            pkill -u "$u" >/dev/null 2>&1
            userdel -r "$u" >/dev/null 2>&1
        fi
    done
    rm -rf "$base"
}
trap cleanup EXIT
for u in "${users[@]}"; do id "$u" >/dev/null 2>&1 && userdel -r "$u" >/dev/null 2>&1; done

# The users run a copy of the command from a folder anyone can read (a checkout under /root is 0700).
mkdir "$base/bin"
cp "$bin/security" "$bin/git-credential-keychain" "$bin/docker-credential-keychain" "$base/bin/"
chmod 755 "$base/bin" "$base/bin/"*
remote=$base/remote.git
git init -q --bare --shared=0777 "$remote"
chmod -R a+rwX "$remote"
cd /

for u in "${users[@]}"; do
    # No git configuration of their own: this machine's /etc/gitconfig is never read
    # (GIT_CONFIG_NOSYSTEM), and no safe.directory is needed for the shared repository, which
    # belongs to root: sync runs no git inside a folder remote.
    useradd -m -d "$base/home-$u" -s /bin/sh "$u"
done

# as USER COMMAND...: COMMAND as that user, in a session keyring of its own, with a clean environment.
as() {
    local u=$1; shift
    setpriv --reuid="$u" --regid="$u" --init-groups env -i HOME="$base/home-$u" PATH="$base/bin:/usr/bin:/bin" \
        GIT_CONFIG_NOSYSTEM=1 keyctl session - "$@" 2> >(grep -v '^Joined session keyring' >&2)
}
A() { as kcsyncA security "$@"; }
B() { as kcsyncB security "$@"; }
C() { as kcsyncC security "$@"; }
secret_of() { "$1" find-generic-password -a "$2" -s "$3" -w 2>/dev/null; }
# holds PATTERN: a line of standard input matches. Read to the end: under pipefail, `grep -q`
# stopping at the first match would make the writer fail with SIGPIPE, and the check with it.
holds() { grep -e "$1" > /dev/null; }

fresh() {
    case_dir=$(mktemp -d "$base/case-XXXXXX")
}
finish() { rm -rf "$case_dir"; }

# Every object of the repository, and its history as text: what someone reading the remote sees.
everything() {
    git -C "$remote" log -p --all 2>/dev/null
    git -C "$remote" cat-file --batch-all-objects --batch 2>/dev/null
    find "$remote" -type f -exec cat {} + 2>/dev/null
}

# The names, servers, accounts, labels and secrets every case uses (checked absent from the remote).
markers=(sync-svc-alpha alpha-account Alpha-Label alpha-secret-1 alpha-secret-2 web.sync-example.org
    web-account web-secret-9 local-only-svc local-secret-7 device-only-svc device-secret-8
    loop-svc loop-account later-svc later-secret-5 beta-changed-3 kcsyncA kcsyncB kcsyncC
    git.sync-example.org git-user git-secret-4 registry.sync-example.org dock-user dock-secret-6)

setup_group() {
    for u in A B C; do printf 'pw\n' | "$u" create-keychain login; done
    A add-generic-password -S -a alpha-account -s sync-svc-alpha -l Alpha-Label -w alpha-secret-1
    A add-internet-password -S -a web-account -s web.sync-example.org -w web-secret-9
    A add-generic-password -a local-account -s local-only-svc -w local-secret-7
    A add-generic-password -a device-account -s device-only-svc -w device-secret-8 --accessibility afterFirstUnlockThisDeviceOnly
    A sync init "$remote"
    for u in B C; do
        "$u" sync join "$remote" > "$case_dir/join-$u"
        code=$(sed -n 's/^code: //p' "$case_dir/join-$u")
        [ -n "$code" ]
        # The existing device shows the same code before approving.
        A sync approve | holds "^code $code "
        A sync approve "$code" > "$case_dir/approve-$u"
        confirmation=$(sed -n 's/^confirmation: //p' "$case_dir/approve-$u")
        [ -n "$confirmation" ]
        # Approved, but nothing is taken before the person confirms on the new machine.
        "$u" sync now | holds '^approved by device'
        expect 51 "$(status_of "$u" sync confirm 00000-00000)" "a wrong confirmation: errSecAuthFailed"
        "$u" sync confirm "$confirmation"
    done
    A sync status | grep -c '^device: ' | holds '^3$'
    C sync status | holds '^state: member'
}

added_appears() {
    for u in B C; do
        expect alpha-secret-1 "$(secret_of "$u" alpha-account sync-svc-alpha)" "on $u"
        expect web-secret-9 "$("$u" find-internet-password -a web-account -s web.sync-example.org -w 2>/dev/null)" "internet password on $u"
        expect 44 "$(status_of "$u" find-generic-password -a local-account -s local-only-svc)" "non-synchronizable item on $u"
        expect 44 "$(status_of "$u" find-generic-password -a device-account -s device-only-svc)" "ThisDeviceOnly item on $u"
    done
    A add-generic-password -S -a alpha2 -s sync-svc-alpha -w alpha-secret-2
    A sync now
    B sync now
    C sync now
    expect alpha-secret-2 "$(secret_of B alpha2 sync-svc-alpha)"
    expect alpha-secret-2 "$(secret_of C alpha2 sync-svc-alpha)"
}

this_device_only_refused() {
    expect 206 "$(status_of A add-generic-password -S -a x -s device-only-svc -w x --accessibility whenUnlockedThisDeviceOnly)" "errSecParam"
}

concurrent_change_and_delete() {
    B add-generic-password -U -S -a alpha2 -s sync-svc-alpha -w beta-changed-3
    C delete-generic-password -a alpha2 -s sync-svc-alpha >/dev/null
    B sync now
    C sync now
    for u in A B C A B; do "$u" sync now >/dev/null; done
    a=$(secret_of A alpha2 sync-svc-alpha; echo ":$?") b=$(secret_of B alpha2 sync-svc-alpha; echo ":$?") c=$(secret_of C alpha2 sync-svc-alpha; echo ":$?")
    expect "$a" "$b" "A and B"
    expect "$a" "$c" "A and C"
    # C's deletion was sent last (a tombstone is dated when the exchange sees the deletion), so it
    # wins, and C's log names the change it replaced.
    expect ":44" "$a" "the later deletion"
    C sync status | holds 'conflict: genp sync-svc-alpha (alpha2) written on device .* replaced by this device.s later change'
}

private_items_stay() {
    local n
    for n in local-only-svc local-secret-7 device-only-svc device-secret-8; do
        if everything | grep -a -q -- "$n"; then echo "$n reached the remote"; return 1; fi
    done
}

nothing_readable() {
    local n
    [ "$(git -C "$remote" rev-list --all | wc -l)" -gt 3 ]
    for n in "${markers[@]}"; do
        if everything | grep -a -q -i -- "$n"; then echo "$n is readable in the repository"; return 1; fi
    done
}

# attack SCRIPT: root, with write access to the remote, changes it from a clone of its own.
attack() {
    rm -rf "$base/attacker"
    git clone -q -b keychain "$remote" "$base/attacker"
    (cd "$base/attacker" && eval "$1" && git add -A && git -c user.name=x -c user.email=x@x commit -q -m x && git push -q origin keychain)
    chmod -R a+rwX "$remote"
}

tampered_refused() {
    f=$(git -C "$remote" ls-tree --name-only keychain records/ | head -1)
    # One byte changed to another (a fixed one may already stand there: nothing to commit).
    attack "b=\$(dd if=$f bs=1 skip=60 count=1 2>/dev/null); c=X; [ \"\$b\" != X ] || c=Y; printf \$c | dd of=$f bs=1 seek=60 conv=notrunc 2>/dev/null"
    B sync now | tee "$case_dir/out"
    grep -q 'refused 1' "$case_dir/out"
    name=${f#records/}
    B sync status | holds "refused record ${name:0:12}"
    expect alpha-secret-1 "$(secret_of B alpha-account sync-svc-alpha)"
    # B wrote its accepted version back: the others go on as before.
    A sync now
    expect alpha-secret-1 "$(secret_of A alpha-account sync-svc-alpha)"
}

older_refused() {
    A add-generic-password -U -S -a alpha-account -s sync-svc-alpha -l Alpha-Label -w alpha-secret-2
    A sync now
    B sync now
    expect alpha-secret-2 "$(secret_of B alpha-account sync-svc-alpha)"
    # The record that changed last, and its version of two commits before.
    f=$(git -C "$remote" diff --name-only keychain~1 keychain -- records/ | head -1)
    [ -n "$f" ]
    old=$(git -C "$remote" rev-list keychain -- "$f" | sed -n 2p)
    [ -n "$old" ]
    git -C "$remote" show "$old:$f" > "$base/old-record"
    attack "cp '$base/old-record' $f"
    B sync now | tee "$case_dir/out"
    grep -q 'refused 1' "$case_dir/out"
    B sync status | holds 'replayed or rolled back'
    expect alpha-secret-2 "$(secret_of B alpha-account sync-svc-alpha)"
    C sync now
    expect alpha-secret-2 "$(secret_of C alpha-account sync-svc-alpha)"
}

removed_reads_nothing() {
    id=$(C sync status | sed -n 's/^this device: //p')
    [ -n "$id" ]
    A sync remove-device "${id:0:12}"
    A add-generic-password -S -a later-account -s later-svc -w later-secret-5
    A sync now
    B sync now
    expect later-secret-5 "$(secret_of B later-account later-svc)"
    expect 51 "$(status_of C sync now)" "the removed device's exchange: errSecAuthFailed"
    expect 44 "$(status_of C find-generic-password -a later-account -s later-svc)"
    A sync status | grep -c '^device: ' | holds '^2$'
}

loop_writer() {
    local u=$1 n=0 end=$(($(date +%s) + loop_seconds)) start stop
    while [ "$(date +%s)" -lt "$end" ]; do
        n=$((n + 1))
        start=$(date +%s.%N)
        "$u" add-generic-password -U -S -a loop-account -s loop-svc -w "$u-$n" >/dev/null || continue
        stop=$(date +%s.%N)
        echo "$u-$n $start $stop" >> "$case_dir/writes"
        if "$u" sync now >/dev/null; then echo "$u-$n" >> "$case_dir/acked"; fi
    done
}

loop_converges() {
    refused_before=$(A sync status | grep -c 'refused' || true)
    : > "$case_dir/writes"
    : > "$case_dir/acked"
    loop_writer A & pa=$!
    loop_writer B & pb=$!
    wait "$pa" "$pb"
    for u in A B A; do "$u" sync now >/dev/null; done
    fa=$(secret_of A loop-account loop-svc) fb=$(secret_of B loop-account loop-svc)
    expect "$fa" "$fb" "A and B end identical"
    echo "     loop: $(wc -l < "$case_dir/writes") writes, $(wc -l < "$case_dir/acked") acknowledged, final $fa" | tee "$base/loop-stats"
    [ "$(wc -l < "$case_dir/acked")" -ge 10 ]
    # The final value is the latest write: none started after it had finished.
    read -r _ _ fend < <(grep "^$fa " "$case_dir/writes")
    awk -v e="$fend" -v f="$fa" '$1 != f && $2 > e { print "write " $1 " started after the final one ended"; bad = 1 } END { exit bad }' "$case_dir/writes"
    # Every other acknowledged write was superseded: by a write that started after it ended, or
    # by the final value, which may be dated later (it had not finished when this one started),
    # with the loss in a conflict log.
    while read -r w; do
        [ "$w" = "$fa" ] && continue
        read -r _ wstart wend < <(grep "^$w " "$case_dir/writes")
        if awk -v e="$wend" '$2 > e { found = 1 } END { exit !found }' "$case_dir/writes"; then
            continue
        fi
        awk -v s="$wstart" -v e="$fend" 'BEGIN { exit !(e >= s) }' || { echo "acknowledged $w was lost to an earlier write"; return 1; }
        { A sync status; B sync status; } | holds 'conflict: .*genp loop-svc (loop-account)' || {
            echo "acknowledged $w lost without a conflict logged"
            { A sync status; B sync status; } | tail -20
            tail -5 "$case_dir/writes"
            return 1
        }
    done < "$case_dir/acked"
    expect "$refused_before" "$(A sync status | grep -c 'refused')" "no record refused during the loop"
    conflicts=$({ A sync status; B sync status; } | grep -c 'conflict: .*genp loop-svc (loop-account)' || true)
    echo "     loop: $conflicts conflicts logged on A and B" >> "$base/loop-stats"
}

# What someone who can write the folder (a group member with no device, a USB stick, a synced
# folder) plants there: every hook receive-pack and upload-pack run, and configuration that runs
# commands or writes files (alternates with core.alternateRefsCommand; a work tree that a push
# updates, running core.fsmonitor). Each leaves a file in ran/ as the user that ran it.
plant_in_folder() {
    local h
    mkdir -m 1777 "$base/ran"
    # (Not reading its input: proc-receive would wait for it, and git ignores SIGPIPE from hooks.)
    printf '#!/bin/sh\ntouch "%s/ran/$(basename "$0")-$(id -un)"\nexit 0\n' "$base" > "$base/planted"
    printf '#!/bin/sh\ntouch "%s/ran/$1-$(id -un)"\nexit 0\n' "$base" > "$base/planted-command"
    chmod 755 "$base/planted" "$base/planted-command"
    for h in pre-receive update post-receive post-update reference-transaction proc-receive push-to-checkout pre-upload-pack; do
        cp "$base/planted" "$remote/hooks/$h"
    done
    git init -q --bare "$base/elsewhere.git"
    echo "$base/elsewhere.git/objects" > "$remote/objects/info/alternates"
    cat >> "$remote/config" <<EOF
[core]
bare = false
worktree = $base/ran/worktree
alternateRefsCommand = $base/planted-command alternateRefsCommand
fsmonitor = $base/planted-command fsmonitor
sshCommand = $base/planted-command sshCommand
[receive]
denyCurrentBranch = updateInstead
procReceiveRefs = refs/heads
autogc = true
[gc]
auto = 1
autoDetach = false
[uploadpack]
packObjectsHook = $base/planted-command packObjectsHook
EOF
    git -C "$remote" symbolic-ref HEAD refs/heads/keychain
    chmod -R a+rwX "$remote"
}

# nothing_ran: no planted hook or command left its mark.
nothing_ran() {
    local marks
    marks=$(ls -A "$base/ran")
    [ -z "$marks" ] || { echo "run from the folder remote: $marks"; return 1; }
}

# packs_bounded: pushes write a pack each, and one in 24 replaces them all (so fetches stay fast).
packs_bounded() {
    local n
    n=$(find "$remote/objects/pack" -name 'pack-*.idx' | wc -l)
    echo "     $n packs in the folder after $(git -C "$remote" rev-list --count keychain) commits"
    [ "$n" -le 25 ]
}

folder_runs_nothing() {
    # A repository that git's gc has packed (refs in packed-refs, loose objects gone) still works.
    git -C "$remote" gc -q
    chmod -R a+rwX "$remote"
    [ ! -e "$remote/refs/heads/keychain" ]
    plant_in_folder
    # Push and fetch: A sends a new item; B, with nothing to send, only fetches.
    A add-generic-password -S -a folder-account -s folder-svc -w folder-secret-1
    A sync now | holds 'sent 1'
    B sync now
    expect folder-secret-1 "$(secret_of B folder-account folder-svc)"
    # And back (the attacker's one changed byte makes every device's next exchange push).
    B add-generic-password -U -S -a folder-account -s folder-svc -w folder-secret-2
    B sync now | holds 'sent 1'
    A sync now
    expect folder-secret-2 "$(secret_of A folder-account folder-svc)"
    # join, through the file:// form: a fetch and a push from a keychain that trusts nothing yet.
    printf 'pw\n' | A create-keychain joiner
    A sync -k joiner join "file://$remote" | holds '^code: '
    A sync -k joiner leave
    nothing_ran
}

# The folder is the remote's owner's: a branch of theirs (the folder was a repository before) keeps
# its objects however many pushes come (the packs are consolidated only where the keychain's
# branch is the folder's only ref), and a sparse "pack" of 2 GiB is refused, not copied.
folder_keeps_other_branches_and_refuses_sparse_packs() {
    local other commit pack i out fake
    # The owner's branch, made in a repository of the test's own (git must not run in the
    # folder: the cases before planted hooks and commands in it), its pack and ref copied in.
    other=$base/other.git
    git init -q --bare "$other"
    commit=$(git -C "$other" -c user.name=o -c user.email=o@x commit-tree -m other \
        "$(printf '100644 blob %s\tREADME\n' "$(printf 'dotfiles\n' | git -C "$other" hash-object -w --stdin)" | git -C "$other" mktree)")
    git -C "$other" update-ref refs/heads/main "$commit"
    git -C "$other" repack -q -a -d
    pack=$(basename "$(ls "$other"/objects/pack/pack-*.pack)" .pack)
    cp "$other/objects/pack/$pack.pack" "$other/objects/pack/$pack.idx" "$remote/objects/pack/"
    echo "$commit" > "$remote/refs/heads/main"
    chmod -R a+rwX "$remote"
    for i in $(seq 26); do
        A add-generic-password -U -S -a pack-account -s pack-svc -w "pack-secret-$i"
        A sync now > /dev/null
    done
    [ -f "$remote/objects/pack/$pack.pack" ] || { echo "the other branch's pack is gone"; return 1; }
    expect 26 "$(find "$remote/objects/pack" -name 'pack-*.idx' -newer "$remote/refs/heads/main" | wc -l)" "a pack per push, none removed"
    rm "$remote/refs/heads/main"
    # Sparse: two gigabytes of holes, which a copy would make real.
    fake=$remote/objects/pack/pack-$(printf 'a%.0s' $(seq 40))
    truncate -s 2G "$fake.pack"
    head -c 2048 /dev/urandom > "$fake.idx"
    chmod a+rw "$fake.pack" "$fake.idx"
    out=$(B sync now 2>&1) && { echo "a sparse pack was fetched: $out"; return 1; }
    holds 'sparse file' <<< "$out"
    rm -f "$fake.pack" "$fake.idx"
    B sync now > /dev/null
    expect pack-secret-26 "$(secret_of B pack-account pack-svc)"
    # A lock a stopped push left an hour ago is named, not taken for another device at work.
    echo 0000000000000000000000000000000000000000 > "$remote/refs/heads/keychain.lock"
    touch -d '1 hour ago' "$remote/refs/heads/keychain.lock"
    B add-generic-password -U -S -a pack-account -s pack-svc -w pack-secret-27
    out=$(B sync now 2>&1) && { echo "a push went past the lock: $out"; return 1; }
    holds 'keychain.lock is 60 minutes old' <<< "$out"
    rm -f "$remote/refs/heads/keychain.lock"
    B sync now | holds 'sent 1'
}

units_and_quiet_exchange() {
    # Without a group, status fails (the unit's ExecCondition skips the exchange): errSecNotAvailable.
    printf 'pw\n' | as kcsyncA security create-keychain other
    expect 53 "$(status_of A sync -k other status)" "status without a group"
    expect 53 "$(status_of A sync -k other now)" "now without a group"
    # An exchange that finds nothing new writes nothing into the keychain (keychain-sync.path
    # watches it: a write of its own would start the next exchange, and so on).
    kc=$base/home-kcsyncA/.local/share/keychains/login.keychain-db
    A sync now
    files() { stat -c '%n %s %y' "$kc"; sha256sum "$kc"; ls "$kc"-* 2>/dev/null || true; }
    before=$(files)
    sleep 0.2
    A sync now
    expect "$before" "$(files)" "keychain untouched by a quiet exchange"
    A sync status | holds '^last exchange: .*sent 0, received 0'
    if ! command -v systemd-analyze >/dev/null; then
        echo "systemd-analyze missing: the units are not verified"
        return 0
    fi
    mkdir -p "$case_dir/units" "$case_dir/run"
    sed "s|@BINDIR@|$base/bin|" "$here/../../packaging/systemd/keychain-sync.service.in" > "$case_dir/units/keychain-sync.service"
    cp "$here/../../packaging/systemd/keychain-sync.timer" "$here/../../packaging/systemd/keychain-sync.path" "$case_dir/units/"
    XDG_RUNTIME_DIR=$case_dir/run systemd-analyze --man=no --user verify "$case_dir"/units/keychain-sync.{service,timer,path}
}

helpers_follow_the_default() {
    A sync default | holds 'this machine only'
    printf 'protocol=https\nhost=git.sync-example.org\nusername=git-user\npassword=git-local-2\n\n' | as kcsyncA git-credential-keychain store
    A sync default on | holds ': synchronizable'
    printf 'protocol=https\nhost=git.sync-example.org\nusername=git-user\npassword=git-secret-4\n\n' | as kcsyncA git-credential-keychain store
    printf '{"ServerURL":"registry.sync-example.org","Username":"dock-user","Secret":"dock-secret-6"}' | as kcsyncA docker-credential-keychain store
    # What import-secrets brings in from git's and docker's files is stored as their helpers store it.
    as kcsyncA sh -c 'umask 077; printf "https://imp-user:git-imported-8@git-import.sync-example.org\n" > "$HOME/.git-credentials"
        mkdir -p "$HOME/.docker"; printf "{\"auths\":{\"registry-import.sync-example.org\":{\"auth\":\"%s\"}}}" "$(printf imp-dock:dock-imported-9 | base64)" > "$HOME/.docker/config.json"'
    A import-secrets --git-credentials --docker-config | holds '^import-secrets: 2 added'
    A sync now
    B sync now
    printf 'protocol=https\nhost=git.sync-example.org\n\n' | as kcsyncB git-credential-keychain get | holds '^password=git-secret-4$'
    echo registry.sync-example.org | as kcsyncB docker-credential-keychain get | holds '"Secret":"dock-secret-6"'
    printf 'protocol=https\nhost=git-import.sync-example.org\n\n' | as kcsyncB git-credential-keychain get | holds '^password=git-imported-8$'
    echo registry-import.sync-example.org | as kcsyncB docker-credential-keychain get | holds '"Secret":"dock-imported-9"'
    # The git credential stored before was updated in place, not kept beside the synchronizable one.
    expect 1 "$(A dump-keychain | grep -c '"srvr"<blob>="git.sync-example.org"')" "one git credential on A"
    A sync default off
}

# --- with keychain-broker: two machines whose keys the broker keeps ------------------------------

# keychain-broker as Tests/broker-lib.sh starts it: its own system user (group tss), setpriv with
# only CAP_SYS_PTRACE, on a socket in a folder under /run. The users' `security` is a copy in that
# folder's bin/ (the broker identifies no program a user could replace), named to the broker as
# its own program, so that items it makes (apple-tool:) are read without a question.
start_broker() {
    broker_setup kcsyncbrk kc-sync-broker || return 1
    broker_copy "$bin" security keychain-broker || return 1
    printf '#!/bin/sh\ncat >/dev/null\nprintf "once\\npw\\n"\n' > "$broker_dir/bin/answer-once"
    chmod 755 "$broker_dir/bin/answer-once"
    broker_start --own-program "$broker_dir/bin/security"
}

# as_kept USER COMMAND...: `as`, with the broker's copy of security and the broker named, and no
# terminal (setsid): nobody to ask, as for a timer's exchange.
as_kept() {
    local u=$1; shift
    setsid -w setpriv --reuid="$u" --regid="$u" --init-groups env -i HOME="$base/home-$u" PATH="$broker_dir/bin:/usr/bin:/bin" \
        GIT_CONFIG_NOSYSTEM=1 KEYCHAIN_BROKER_SOCKET="$broker_socket" keyctl session - "$@" 2> >(grep -v '^Joined session keyring' >&2)
}
D() { as_kept kcsyncD security "$@"; }
# D's `security sync now` as a timer runs it: no terminal, no answerer, its output in the case's
# out and err; `timeout`, because a question nobody can answer must fail at once, not wait.
D_exchange() {
    timeout 120 setsid -w setpriv --reuid=kcsyncD --regid=kcsyncD --init-groups env -i HOME="$base/home-kcsyncD" \
        PATH="$broker_dir/bin:/usr/bin:/bin" GIT_CONFIG_NOSYSTEM=1 KEYCHAIN_BROKER_SOCKET="$broker_socket" \
        keyctl session - security sync now </dev/null > "$case_dir/out" 2> "$case_dir/err"
    cat "$case_dir/out" "$case_dir/err"
}
E() { as_kept kcsyncE security "$@"; }

# Both keychains in the broker's keeping. An item that trusts `security` (made by it: apple-tool:)
# syncs; one whose list names only another program cannot be read by the exchange, which has
# nobody to ask: it is left out with a warning (errSecInteractionNotAllowed, never a hang), the
# rest goes, nothing is lost, and the next exchange tries it again.
broker_kept_sync() {
    local remote2=$base/broker-remote.git code confirmation
    git init -q --bare --shared=0777 "$remote2"
    chmod -R a+rwX "$remote2"
    # The case runs in a subshell: its broker is stopped when that ends, failed or not.
    trap broker_teardown EXIT
    start_broker
    for u in D E; do printf 'pw\n' | "$u" create-keychain login; done
    D status | holds 'custody of keychain-broker'
    E status | holds 'custody of keychain-broker'
    D add-generic-password -S -a kept-account -s broker-trusted-svc -w broker-secret-1
    D add-generic-password -S -a kept-account -s broker-untrusted-svc -w broker-secret-2 -T /usr/bin/true
    D sync init "$remote2"
    E sync join "$remote2" > "$case_dir/join"
    code=$(sed -n 's/^code: //p' "$case_dir/join")
    D sync approve "$code" > "$case_dir/approve"
    confirmation=$(sed -n 's/^confirmation: //p' "$case_dir/approve")
    E sync now > /dev/null
    E sync confirm "$confirmation"
    D_exchange
    holds ', skipped 1' < "$case_dir/out"
    holds 'broker-untrusted-svc (kept-account) not sent: reading it needs a person to answer' < "$case_dir/err"
    E sync now
    expect broker-secret-1 "$(E find-generic-password -a kept-account -s broker-trusted-svc -w)" "the trusted item on E"
    expect 44 "$(status_of E find-generic-password -a kept-account -s broker-untrusted-svc)" "the untrusted item on E"
    # Nothing lost on D: the item is there, and the person can still read it (answered once).
    D find-generic-password -a kept-account -s broker-untrusted-svc | holds broker-untrusted-svc
    expect broker-secret-2 "$(as_kept kcsyncD env KEYCHAIN_ACCESS_ANSWERER="$broker_dir/bin/answer-once" security find-generic-password -a kept-account -s broker-untrusted-svc -w)"
    # Tried again at the next exchange, and said again.
    D_exchange
    holds ', skipped 1' < "$case_dir/out"
    holds 'broker-untrusted-svc (kept-account) not sent' < "$case_dir/err"
    broker_teardown
}

check "three machines in one group: init, join, same code, approve, confirm" setup_group
check "an item added on A appears on B and C; others stay" added_appears
check "synchronizable ThisDeviceOnly is errSecParam" this_device_only_refused
check "changed on B, deleted on C at once: the same everywhere, loss logged" concurrent_change_and_delete
check "the git and docker helpers store synchronizable items after sync default on" helpers_follow_the_default
check "non-synchronizable and ThisDeviceOnly items never reach the remote" private_items_stay
check "a tampered record is refused and reported" tampered_refused
check "an older record put back is refused and reported" older_refused
check "a removed device reads nothing written after" removed_reads_nothing
check "nothing planted in a folder remote (hooks, config, alternates) runs: push, fetch, join" folder_runs_nothing
check "sync status without a group, a quiet exchange writes nothing, the units verify" units_and_quiet_exchange
check "two machines writing one item for ${loop_seconds}s end identical, nothing acknowledged lost" loop_converges
[ -f "$base/loop-stats" ] && cat "$base/loop-stats"
check "nothing planted in the folder remote ran during the loop either" nothing_ran
check "a branch of the folder's owner keeps its objects; a sparse pack is refused" folder_keeps_other_branches_and_refuses_sparse_packs
check "the folder holds few packs however many pushes" packs_bounded
check "no server, account, label or secret readable in the repository or its history" nothing_readable
check "broker: an item trusting security syncs; one that does not is skipped and said, not hung, not lost, tried again" broker_kept_sync
summary
