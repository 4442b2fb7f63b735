#!/usr/bin/env bash
# Runs every suite of `make test` and ends with one line counting them all.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0

swift test --skip-build --disable-swift-testing 2>&1 | tee "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
xctest=$(grep -E "^Test Suite 'All tests' (passed|failed)" -A1 "$log" | grep -oE 'Executed [0-9]+ tests?, with [0-9]+ failures?' | tail -1)
passed=$(echo "$xctest" | awk '{print $2 - $5}')
failed=$(echo "$xctest" | awk '{print $5}')

for suite in "Tests/cli/run.sh .build/debug/security" "Tests/git/run.sh .build/debug" "Tests/docker/run.sh .build/debug" "Tests/pam/run.sh .build/debug" "Tests/stress/run.sh .build/debug" "Tests/tpm/run.sh .build/debug" "Tests/secret-service/run.sh .build/debug" "Tests/presence/run.sh .build/debug" "Tests/install/run.sh" "Tests/deb/run.sh"; do
    bash $suite 2>&1 | tee "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
    passed=$((passed + ${line%% passed*}))
    failed=$((failed + $(echo "$line" | awk '{print $3}')))
done

echo
echo "all suites: $passed passed, $failed failed"
exit $status
