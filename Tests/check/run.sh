#!/usr/bin/env bash
# `make check` catches what it is there for: on a copy of the tree (nothing built), Tools/check.sh
# passes the clean copy and fails once a violation is planted: an upward import, a shellcheck
# error, a badly formatted Swift file. Lint steps only (no build), so the suite takes seconds;
# root is not needed.
#
# The clean copy must pass `--lint-only` as a whole (the tree is swift-format clean); a file planted
# into the copy shows swift-format passing a well formatted file and failing a malformed one.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/../lib.sh"

clean_tree_is_formatted=true

fresh() {
    case_dir=$(mktemp -d /tmp/kc-check-XXXXXX)
    tree=$case_dir/tree
    copy_tree "$repo" "$tree"
}
finish() { rm -rf "$case_dir"; }

# check_tree [STEP...]: Tools/check.sh of the copy, its output kept for the case's log.
check_tree() { (cd "$tree" && bash Tools/check.sh "$@") > "$case_dir/out" 2>&1; local status=$?; cat "$case_dir/out"; return "$status"; }
# fails_naming TEXT STEP...: the check fails, and its output names TEXT.
fails_naming() {
    local text=$1; shift
    if check_tree "$@"; then echo "Tools/check.sh $* passed with the violation planted"; return 1; fi
    grep -qF -- "$text" "$case_dir/out" || { echo "the output does not name $text"; return 1; }
}

# A Swift file formatted as .swift-format wants, and the same code badly formatted.
planted=Sources/KeychainCore/CheckPlanted.swift
well_formatted() {
    cat <<'SWIFT'
/// Planted by Tests/check/run.sh: formatted as .swift-format wants.
struct CheckPlanted {
    var name: String

    func greeting(for other: String) -> String {
        if other.isEmpty {
            return "hello, \(name)"
        }
        return "hello, \(other), from \(name)"
    }
}
SWIFT
}
badly_formatted() {
    cat <<'SWIFT'
/// Planted by Tests/check/run.sh: two-space indentation, parentheses and a one-line body.
struct CheckPlanted {
  var name : String
  func greeting(for other: String) -> String {
    if (other.isEmpty) { return "hello, \(name)" }
    return "hello, \(other), from \(name)"
  }
}
SWIFT
}

clean_copy_passes() {
    check_tree shellcheck imports
    if $clean_tree_is_formatted; then check_tree --lint-only; fi
}

formatted_file_passes() {
    well_formatted > "$tree/$planted"
    CHECK_FORMAT_PATHS=$planted check_tree format
}

malformed_file_fails() {
    badly_formatted > "$tree/$planted"
    CHECK_FORMAT_PATHS=$planted fails_naming "$planted" format
    if $clean_tree_is_formatted; then fails_naming "$planted" --lint-only; fi
}

upward_import_fails() {
    # The engine must not know Apple's face above it.
    printf 'import Security\n\nlet planted = 1\n' > "$tree/Sources/KeychainCore/CheckPlanted.swift"
    fails_naming "Sources/KeychainCore/CheckPlanted.swift:1: import Security" imports
    # The engine knows none of the targets over it (presence, sync, the TPM policy).
    printf 'internal import KeychainPresence\n' > "$tree/Sources/KeychainCore/CheckPlanted.swift"
    fails_naming "Sources/KeychainCore/CheckPlanted.swift:1: import KeychainPresence" imports
    printf 'import KeychainTPMPolicy\n' > "$tree/Sources/KeychainCore/CheckPlanted.swift"
    fails_naming "Sources/KeychainCore/CheckPlanted.swift:1: import KeychainTPMPolicy" imports
    # Nor does the helper's client know the TPM policy over it.
    printf 'import KeychainTPMPolicy\n' > "$tree/Sources/KeychainTPMClient/CheckPlanted.swift"
    fails_naming "Sources/KeychainTPMClient/CheckPlanted.swift:1: import KeychainTPMPolicy" imports
    rm "$tree/Sources/KeychainTPMClient/CheckPlanted.swift"
    # The other spellings of an import count too.
    printf '@_implementationOnly import LocalAuthentication\n' > "$tree/Sources/KeychainCore/CheckPlanted.swift"
    fails_naming "import LocalAuthentication" imports
    printf 'internal import ArgumentParser\n' > "$tree/helpers/CredentialHelperSupport/CheckPlanted.swift"
    rm "$tree/Sources/KeychainCore/CheckPlanted.swift"
    fails_naming "helpers/CredentialHelperSupport/CheckPlanted.swift:1: import ArgumentParser" imports
    if $clean_tree_is_formatted; then fails_naming "import ArgumentParser" --lint-only; fi
}

shellcheck_error_fails() {
    # In .ci/run, a script found by its #! line rather than a .sh name: iterating over ls (SC2045).
    printf 'for f in $(ls /tmp); do echo "$f"; done\n' >> "$tree/.ci/run"
    fails_naming ".ci/run:" shellcheck
    if $clean_tree_is_formatted; then fails_naming ".ci/run:" --lint-only; fi
}

# The build's filter (make, Tools/check.sh): a real compiler warning planted in the project's code
# fails it, naming the file; what SwiftPM fetched into .build and glibc's static-link notes do not.
planted_warning_fails_the_build() {
    printf 'func checkPlanted() -> Int {\n    let unused = 1\n    return 2\n}\n' > "$tree/Sources/KeychainCore/CheckPlanted.swift"
    swiftc -parse-as-library -typecheck "$tree/Sources/KeychainCore/CheckPlanted.swift" > "$case_dir/compiler" 2>&1
    grep -q 'CheckPlanted.swift:2:9: warning: ' "$case_dir/compiler" || { cat "$case_dir/compiler"; return 1; }
    if (cd "$tree" && bash Tools/quiet-build.sh) < "$case_dir/compiler" > "$case_dir/out" 2>&1; then
        cat "$case_dir/out"; echo "a planted warning passed"; return 1
    fi
    grep -q "quiet-build: 1 compiler warnings in the project's own code" "$case_dir/out"
    grep -q 'CheckPlanted.swift:2:9: warning: ' "$case_dir/out"
    # The same warning in a fetched package, and the linker's notes about the static tools, pass.
    { sed "s|$tree/Sources|$tree/.build/checkouts/some-package/Sources|" "$case_dir/compiler"
      echo "/usr/bin/ld: x.o: in function \`f': warning: Using 'dlopen' in statically linked applications requires at runtime the shared libraries from the glibc version used for linking"
      echo 'Build complete!'; } > "$case_dir/other"
    (cd "$tree" && bash Tools/quiet-build.sh) < "$case_dir/other" > "$case_dir/out" 2>&1 || { cat "$case_dir/out"; return 1; }
    refute_grep 'statically linked' "$case_dir/out"
    grep -q 'Build complete!' "$case_dir/out"
}
refute_grep() { if grep -q "$1" "$2"; then echo "$2 holds $1"; return 1; fi; }

check "the clean copy passes the import check and shellcheck" clean_copy_passes
check "swift-format passes a well formatted Swift file" formatted_file_passes
check "swift-format fails a badly formatted Swift file, naming it" malformed_file_fails
check "an upward or undeclared import fails the import check, naming the file and line" upward_import_fails
check "a shellcheck error in a script without .sh fails shellcheck, naming it" shellcheck_error_fails
check "a compiler warning in the project's code fails the build's filter; fetched packages' and the linker's notes do not" planted_warning_fails_the_build
summary
