#!/usr/bin/env bash
# `make check`: what a change must pass before `make test`, without root, in a few minutes on a
# built tree. Every step runs even when an earlier one failed, so one run shows every problem.
#
#   - unit: swift build --build-tests (debug), then the XCTest unit tests
#   - shellcheck: every shell script of the tree, at severity warning
#   - format: swift-format lint --strict with the committed .swift-format
#   - imports: every Swift import declared in Package.swift (Tools/check-imports.py)
#
# Usage: Tools/check.sh [--lint-only] [STEP...]
#   --lint-only   shellcheck, format and imports (no build): what Tests/check/run.sh runs
#   STEP...       only these steps
# Environment: CHECK_FORMAT_PATHS (files or folders swift-format lints instead of the Swift folders),
# CHECK_VERBOSE=1 (print every swift-format finding, not the first 40).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
export PATH=/opt/swift/usr/bin:$PATH
swift=${SWIFT:-swift}

steps=()
for arg in "$@"; do
    case $arg in
        --lint-only) steps+=(shellcheck format imports) ;;
        unit|shellcheck|format|imports) steps+=("$arg") ;;
        -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "check: unknown argument $arg (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#steps[@]} -gt 0 ] || steps=(unit shellcheck format imports)

# Kept out of swift-format: the snippets of Apple's and tutorials' documentation, compiled as
# their authors wrote them (the point of the test is that such code builds unchanged).
format_excluded=(Tests/SecurityTests/SnippetTests.swift)
# The folders of Swift code: the targets' sources and tests (Package.swift puts targets in all of these).
swift_folders=(Sources Tests helpers pam bench)

results=() failed=0
result() {   # STEP ok|FAILED [DETAIL]
    results+=("$1 $2${3:+ ($3)}")
    [ "$2" = ok ] || failed=1
}

# Everything of the tree that is ours: no build products, no VCS or SwiftPM state.
tree_files() {
    find . \( -name .git -o -name .swiftpm -o -name '.build' -o -name '.build-*' -o -name '.build_*' \) -prune -o \
        -type f -print | sed 's|^\./||' | LC_ALL=C sort
}

step_unit() {
    echo "== unit: swift build --build-tests, swift test"
    # The linker's notes about getaddrinfo/dlopen in static executables are hidden (CONTRIBUTING.md);
    # a compiler warning about the project's own code fails the step.
    if ! { set -o pipefail; "$swift" build --build-tests 2>&1 | bash Tools/quiet-build.sh; }; then
        result unit FAILED "the build failed or warned"; return
    fi
    local log
    log=$(mktemp)
    "$swift" test --skip-build --disable-swift-testing 2>&1 | tee "$log"
    local status=${PIPESTATUS[0]}
    local line
    line=$(grep -E "^Test Suite 'All tests' (passed|failed)" -A1 "$log" | grep -oE 'Executed [0-9]+ tests?, with .*failures?' | tail -1)
    rm -f "$log"
    if [ "$status" -eq 0 ]; then result unit ok "${line:-no summary}"; else result unit FAILED "${line:-swift test exited $status}"; fi
}

step_shellcheck() {
    echo "== shellcheck -S warning"
    if ! command -v shellcheck >/dev/null; then result shellcheck FAILED "shellcheck is not installed: make check-deps"; return; fi
    local scripts=() file first
    while IFS= read -r file; do
        if [[ "$file" == *.sh ]]; then scripts+=("$file"); continue; fi
        IFS= read -r first < "$file" 2>/dev/null || continue
        [[ "$first" =~ ^#!(/usr/bin/env\ +|/bin/|/usr/bin/)(ba|da)?sh([[:space:]]|$) ]] && scripts+=("$file")
    done < <(tree_files)
    # -x follows `source`d files it can find; warning and error findings fail, style and info ones
    # (quoting that cannot matter, and the like) are the author's call.
    [ "${CHECK_VERBOSE:-}" != 1 ] || printf '%s\n' "${scripts[@]}"
    # Spread over the cores, a few scripts a process: -x reads the sourced Tests/lib.sh again for
    # every suite, which takes seconds in one process. xargs fails if any of them does.
    if printf '%s\0' "${scripts[@]}" | xargs -0 -n 4 -P "$(nproc)" shellcheck -x -S warning -f gcc; then
        result shellcheck ok "${#scripts[@]} scripts"
    else
        result shellcheck FAILED "${#scripts[@]} scripts"
    fi
}

step_format() {
    echo "== swift-format lint --strict (.swift-format)"
    if ! command -v swift-format >/dev/null; then result format FAILED "swift-format not found in /opt/swift/usr/bin"; return; fi
    local files=() file excluded
    if [ -n "${CHECK_FORMAT_PATHS:-}" ]; then
        # shellcheck disable=SC2206 # a list of paths on purpose
        files=($CHECK_FORMAT_PATHS)
    else
        while IFS= read -r file; do
            for excluded in "${format_excluded[@]}"; do [ "$file" = "$excluded" ] && continue 2; done
            files+=("$file")
        done < <(find "${swift_folders[@]}" -name '*.swift' -type f 2>/dev/null | LC_ALL=C sort)
    fi
    local out status count
    out=$(swift-format lint --strict --configuration .swift-format --recursive --parallel "${files[@]}" 2>&1)
    status=$?
    count=$(grep -cE ': (warning|error): ' <<< "$out")
    if [ "${CHECK_VERBOSE:-}" = 1 ]; then printf '%s\n' "$out"; else printf '%s\n' "$out" | head -40; fi
    [ "$count" -le 40 ] || [ "${CHECK_VERBOSE:-}" = 1 ] || echo "... $((count - 40)) more (CHECK_VERBOSE=1 shows all)"
    if [ "$status" -eq 0 ] && [ "$count" -eq 0 ]; then
        result format ok "${#files[@]} files"
    else
        local rules
        rules=$(grep -oE '\[[A-Za-z]+\]' <<< "$out" | sort | uniq -c | sort -rn | awk '{ printf "%s%s %s", sep, $1, substr($2, 2, length($2) - 2); sep = ", " }')
        result format FAILED "$count findings in ${#files[@]} files${rules:+: $rules}"
    fi
}

step_imports() {
    echo "== imports declared in Package.swift"
    if /usr/bin/python3 Tools/check-imports.py .; then result imports ok; else result imports FAILED "undeclared imports above"; fi
}

for step in "${steps[@]}"; do "step_$step"; done

echo
for line in "${results[@]}"; do echo "check: $line"; done
exit "$failed"
