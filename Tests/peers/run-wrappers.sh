#!/usr/bin/env bash
# Builds Swift keychain wrappers written for Apple's platforms against this package's `Security`
# product and runs their own XCTest suites on Linux. Their code is never kept here: give checkouts
# you fetched yourself; each is copied to a scratch directory and changed only as a cross-platform
# package would change it (Package.swift depends on this package's Security for Linux; `import
# Security` where Darwin's Foundation imports it implicitly).
#
#   Tests/peers/run-wrappers.sh keychain-swift=/path/to/evgenyneu/keychain-swift \
#                               SwiftKeychainWrapper=/path/to/jrendel/SwiftKeychainWrapper
#
# Runs against a throwaway keychain (KEYCHAIN_PATH) made with .build/debug/security. Without
# network, swift-argument-parser (this package's dependency) is resolved from this worktree's
# .build/checkouts through a SwiftPM mirror. Not part of `make test`: it needs fetched code.
set -euo pipefail
export PATH=/opt/swift/usr/bin:$PATH
here=$(cd "$(dirname "$0")/../.." && pwd)
security="$here/.build/debug/security"
[ -x "$security" ] || (cd "$here" && swift build --product security >/dev/null)
scratch=$(mktemp -d /tmp/peer-wrappers-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
export KEYCHAIN_PATH="$scratch/keychains/login.keychain-db"
"$security" create-keychain -p "peer-$$" "$KEYCHAIN_PATH" >/dev/null

# Adds this package (for Linux only) to a package's dependencies and to the named targets.
depend_on_security() { # package.swift target...
    local manifest=$1; shift
    python3 - "$manifest" "$here" "$@" <<'PY'
import re, sys
path, here, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
s = open(path).read()
# `condition:` needs tools 5.3.
s = re.sub(r'swift-tools-version:\s*[0-9.]+', lambda m: m.group(0) if tuple(map(int, m.group(0).split(':')[1].strip().split('.')[:2])) >= (5, 3) else 'swift-tools-version:5.3', s, count=1)
dep = f'.package(path: "{here}")'
if re.search(r'dependencies:\s*\[\s*\]\s*,\s*targets', s):
    s = re.sub(r'dependencies:\s*\[\s*\]\s*,(\s*)targets', f'dependencies: [{dep}],\\1targets', s, count=1)
elif (t := re.search(r'^(\s*)targets:\s*\[', s, re.M)) and not re.search(r'^\s*dependencies:\s*\[', s[:t.start()], re.M):
    s = s[:t.start()] + f'{t.group(1)}dependencies: [{dep}],' + s[t.start():]
else:
    s = re.sub(r'(\n\s*dependencies:\s*\[)', f'\\1\n        {dep},', s, count=1)
product = '.product(name: "Security", package: "%s", condition: .when(platforms: [.linux]))' % here.rstrip('/').split('/')[-1]
for t in targets:
    m = re.search(r'\.target\(\s*name:\s*"%s"' % re.escape(t), s)
    if not m: sys.exit(f'no target {t} in {path}')
    rest = s[m.end():]
    d = re.match(r'(\s*,\s*dependencies:\s*\[)', rest)
    if d:
        s = s[:m.end()] + d.group(1) + product + ', ' + rest[d.end():]
    else:
        s = s[:m.end()] + f', dependencies: [{product}]' + rest
open(path, 'w').write(s)
PY
}

# `import Security` after `import Foundation` (or first) in files that use it without importing it.
add_import() { # file...
    for f in "$@"; do
        grep -q '^import Security' "$f" && continue
        if grep -q '^import Foundation' "$f"; then sed -i '0,/^import Foundation$/s//import Foundation\nimport Security/' "$f"
        else sed -i '0,/^import XCTest$/s//import XCTest\nimport Security/' "$f"; fi
    done
}

run() { # name dir
    local name=$1 dir=$2 out
    (cd "$dir" && mkdir -p .swiftpm/configuration &&
        swift package config set-mirror --original https://github.com/apple/swift-argument-parser \
            --mirror "$here/.build/checkouts/swift-argument-parser" >/dev/null 2>&1 || true)
    echo "== $name $(git -C "$dir" rev-parse HEAD 2>/dev/null || echo '(not a git checkout)')"
    (cd "$dir" && swift build --build-tests 2>&1 | grep -E "error:|Build complete" | tail -5) || true
    out=$(cd "$dir" && swift test --skip-build 2>&1 || true)
    grep -E "error:|failed \(" <<<"$out" | head -20 || true
    grep -E "Executed [0-9]+ tests" <<<"$out" | tail -1
}

status=0
for spec in "$@"; do
    name=${spec%%=*} src=${spec#*=}
    dir="$scratch/$name"
    git clone -q "$src" "$dir" 2>/dev/null || cp -a "$src" "$dir"
    case $name in
        keychain-swift)
            depend_on_security "$dir/Package.swift" KeychainSwift
            add_import "$dir/Tests/KeychainSwiftTests/SynchronizableTests.swift" ;;
        SwiftKeychainWrapper)
            depend_on_security "$dir/Package.swift" SwiftKeychainWrapper
            add_import "$dir/SwiftKeychainWrapper/KeychainWrapper.swift" "$dir/SwiftKeychainWrapper/KeychainItemAccessibility.swift" ;;
        *) echo "unknown wrapper $name (known: keychain-swift, SwiftKeychainWrapper)" >&2; status=2; continue ;;
    esac
    summary=$(run "$name" "$dir")
    echo "$summary"
    grep -q "with 0 failures" <<<"$summary" || status=1
done
exit $status
