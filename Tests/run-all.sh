#!/usr/bin/env bash
# Runs every suite of `make test` and ends with one line counting them all:
# `all suites: N passed, N failed, N skipped` (the plain closing line CI reads).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0

swift test --skip-build --disable-swift-testing 2>&1 | tee "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
# XCTest: "Executed 183 tests, with 0 failures (0 unexpected)", or with skips
# "Executed 183 tests, with 3 tests skipped and 0 failures (0 unexpected)"; executed counts the skipped.
xctest=$(grep -E "^Test Suite 'All tests' (passed|failed)" -A1 "$log" |
    grep -oE 'Executed [0-9]+ tests?, with ([0-9]+ tests? skipped and )?[0-9]+ failures?' | tail -1)
if [ -n "$xctest" ]; then
    executed=$(sed -E 's/^Executed ([0-9]+) .*/\1/' <<< "$xctest")
    failed=$(sed -E 's/.* ([0-9]+) failures?$/\1/' <<< "$xctest")
    skipped=$(sed -nE 's/.*, with ([0-9]+) tests? skipped.*/\1/p' <<< "$xctest")
    skipped=${skipped:-0}
    passed=$((executed - skipped - failed))
else
    echo "run-all: no XCTest summary line"; passed=0 failed=1 skipped=0 status=1
fi

for suite in "Tests/cli/run.sh .build/debug/security" "Tests/git/run.sh .build/debug" "Tests/docker/run.sh .build/debug" \
        "Tests/pam/run.sh .build/debug" "Tests/stress/run.sh .build/debug" "Tests/tpm/run.sh .build/debug" "Tests/tpm-pam/run.sh .build/debug" \
        "Tests/secret-service/run.sh .build/debug" "Tests/import/run.sh .build/debug" "Tests/desktop/run.sh .build/debug" "Tests/kde/run.sh .build/debug" \
        "Tests/trixie/run.sh .build/debug" "Tests/presence/run.sh .build/debug" "Tests/broker/run.sh .build/debug" "Tests/access/run.sh .build/debug" "Tests/dialog/run.sh .build/debug" "Tests/sync/run.sh .build/debug" "Tests/ssh/run.sh .build/debug" "Tests/install/run.sh" "Tests/deb/run.sh" "Tests/check/run.sh" "Tests/bench/run.sh"; do
    # shellcheck disable=SC2086 # the suite's path and its argument, as two words
    bash $suite 2>&1 | tee "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    # Each suite ends with `N passed, N failed`, and `, N skipped` when it counts skips.
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -1)
    if [ -z "$line" ]; then
        echo "run-all: ${suite%% *} printed no summary line"; failed=$((failed + 1)) status=1
        continue
    fi
    read -r suite_passed _ suite_failed _ suite_skipped _ <<< "${line//,/}"
    passed=$((passed + suite_passed))
    failed=$((failed + suite_failed))
    skipped=$((skipped + ${suite_skipped:-0}))
done

echo
echo "all suites: $passed passed, $failed failed, $skipped skipped"
exit $status
