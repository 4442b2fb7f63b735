#!/usr/bin/env bash
# make bench's writing path, without running make bench (minutes, peers, root): bench/report.py
# on the saved small results in bench/testdata/fake-run writes its table into a copy of
# bench/README.md between the markers, and keeps the hand-written notes around it byte for byte.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/../lib.sh"

fake=$repo/bench/testdata/fake-run
fresh() { case_dir=$(mktemp -d /tmp/kc-bench-XXXXXX); cp "$repo/bench/README.md" "$case_dir/README.md"; }
finish() { rm -rf "$case_dir"; }
report() { BENCH_DATE=2000-01-01 /usr/bin/python3 "$repo/bench/report.py" "$fake" 100 10 1000 "$@"; }

# The file outside the table, and the table alone.
outside() { sed '/^<!-- make bench writes the table/,/^<!-- end of the table make bench writes -->$/d' "$1"; }
inside() { sed -n '/^<!-- make bench writes the table/,/^<!-- end of the table make bench writes -->$/p' "$1"; }

writes_the_table_keeps_the_notes() {
    report "" --readme "$case_dir/README.md" > "$case_dir/printed"
    # The new table is in, the saved run's figures with it. Into a file first: `inside | grep -q`
    # fails under pipefail whenever grep stops reading before sed has written the whole table.
    inside "$case_dir/README.md" > "$case_dir/table"
    grep -q '^make bench, 2000-01-01: ' "$case_dir/table"
    grep -qF '| git helper `get`, 100 items vs credential-store | 2.46 ms | 2.50 ms | 0.98x | <= 1.3x | yes |' "$case_dir/table"
    grep -qF 'Peers'"'"' peak RSS for comparison: git 3.7 MiB' "$case_dir/table"
    # What it printed is what it wrote.
    diff <(inside "$case_dir/README.md" | sed '1d;$d') <(sed '1d' "$case_dir/printed")
    # Everything else is as it was: the notes survive.
    diff <(outside "$repo/bench/README.md") <(outside "$case_dir/README.md")
    grep -q '^## The misses, and their floors$' "$case_dir/README.md"
    # A second run writes the same file again (nothing appended, markers kept once).
    cp "$case_dir/README.md" "$case_dir/first"
    report "" --readme "$case_dir/README.md" > /dev/null
    cmp "$case_dir/first" "$case_dir/README.md"
    expect 1 "$(grep -c '^<!-- make bench writes the table' "$case_dir/README.md")" "begin markers"
}

refuses_without_markers() {
    printf '# Benchmarks\n\nNotes only.\n' > "$case_dir/README.md"
    cp "$case_dir/README.md" "$case_dir/before"
    if report "" --readme "$case_dir/README.md" > "$case_dir/out" 2>&1; then echo "report.py wrote a file without markers"; return 1; fi
    grep -q 'has no table markers' "$case_dir/out"
    cmp "$case_dir/before" "$case_dir/README.md"
}

run_sh_writes_bench_readme() {
    grep -qE 'report\.py" .*--readme "\$here/README\.md"' "$repo/bench/run.sh"
    grep -qE 'report\.py" .*--readme "\$root/README\.md"' "$repo/bench/run.sh"
}

# The project's README carries the same table (its Benchmarks section), written in the same run.
writes_both_readmes() {
    cp "$repo/README.md" "$case_dir/PROJECT.md"
    report "" --readme "$case_dir/README.md" --readme "$case_dir/PROJECT.md" > /dev/null
    diff <(inside "$case_dir/README.md") <(inside "$case_dir/PROJECT.md")
    grep -q '^make bench, 2000-01-01: ' "$case_dir/PROJECT.md"
    diff <(outside "$repo/README.md") <(outside "$case_dir/PROJECT.md")
}

# bench/broker.sh's figures: medians over its runs, the bars of issue 54; without root, a note.
broker_rows() {
    report "" > "$case_dir/printed"
    grep -qF '| SecItemCopyMatching returning data through keychain-broker vs the kernel keyring'"'"'s custody (100 items, same build) | 62.0 us | 20.0 us | 3.10x | <= 1.5x | **no** |' "$case_dir/printed"
    grep -qF '| git helper `get` through keychain-broker, 100 items, vs credential-store | 2.90 ms | 2.50 ms | 1.16x | <= 1.3x | yes |' "$case_dir/printed"
    grep -qF '| the same `get` through keychain-broker vs with its keys in the kernel keyring (what the broker adds to a process) | 2.90 ms | 2.40 ms | +0.50 ms | (no bar) | yes |' "$case_dir/printed"
    grep -qF '| 100 items read in a row (SecItemCopyMatching each) by the program that made them, through keychain-broker, vs the kernel keyring'"'"'s custody | 0.01 s | 0.00 s | 68 us each | (a figure) | yes |' "$case_dir/printed"
    # A run without root: no broker files, and the table says why.
    cp -r "$fake" "$case_dir/run"
    rm "$case_dir/run"/broker-*
    echo "broker figures: skipped (they need root)" > "$case_dir/run/broker-skipped.txt"
    BENCH_DATE=2000-01-01 /usr/bin/python3 "$repo/bench/report.py" "$case_dir/run" 100 10 1000 "" > "$case_dir/printed"
    if grep -q 'keychain-broker' "$case_dir/printed"; then echo "broker rows without broker figures"; return 1; fi
    grep -q 'broker figures: skipped (they need root)' "$case_dir/printed"
}

run_sh_runs_broker_sh() {
    grep -qE '^bash "\$here/broker\.sh" "\$bin" "\$work"$' "$repo/bench/run.sh"
}

# bench/broker-desktop.sh's figures: what the broker adds to a signature through the SSH agent and
# to a Secret Service lookup, against issue 55's bar (+0.2 ms); without root, a note.
deputy_rows() {
    report "" > "$case_dir/printed"
    grep -qF '| SSH signature by ssh-keygen (`ssh-keygen -Y sign`, on a new key'"'"'s list) through keychain-ssh-agent, its keychain kept by keychain-broker vs in the kernel keyring (same build, whole commands) | 7.73 ms | 5.11 ms | +2.61 ms | <= +0.2 ms | **no** |' "$case_dir/printed"
    grep -qF '| the Secret Service'"'"'s own lookup (SearchItems + GetSecrets on an open session) by the program that stored the item, 100 items, through keychain-broker vs the kernel keyring'"'"'s custody (same build) | 0.37 ms | 0.11 ms | +0.26 ms | <= +0.2 ms | **no** |' "$case_dir/printed"
    cp -r "$fake" "$case_dir/run"
    rm "$case_dir/run"/broker-ss*
    echo "deputy figures: skipped (they need root)" > "$case_dir/run/broker-desktop-skipped.txt"
    BENCH_DATE=2000-01-01 /usr/bin/python3 "$repo/bench/report.py" "$case_dir/run" 100 10 1000 "" > "$case_dir/printed"
    if grep -q 'keychain-ssh-agent, its keychain kept\|Secret Service'"'"'s own lookup' "$case_dir/printed"; then
        echo "deputy rows without their figures"; return 1
    fi
    grep -q 'deputy figures: skipped (they need root)' "$case_dir/printed"
}

run_sh_runs_broker_desktop_sh() {
    grep -qE '^bash "\$here/broker-desktop\.sh" "\$bin" "\$work"$' "$repo/bench/run.sh"
}

check "report.py writes the table into bench/README.md and keeps the notes around it" writes_the_table_keeps_the_notes
check "report.py refuses a README without the table markers, changing nothing" refuses_without_markers
check "bench/run.sh (make bench) writes bench/README.md and README.md through report.py" run_sh_writes_bench_readme
check "report.py writes the same table into every README it is given" writes_both_readmes
check "report.py makes the broker rows from bench/broker.sh's figures, or says why there are none" broker_rows
check "bench/run.sh (make bench) runs bench/broker.sh" run_sh_runs_broker_sh
check "report.py makes the rows of the broker's deputies from bench/broker-desktop.sh's figures, or says why there are none" deputy_rows
check "bench/run.sh (make bench) runs bench/broker-desktop.sh" run_sh_runs_broker_desktop_sh
summary
