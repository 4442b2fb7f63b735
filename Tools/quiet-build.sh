#!/usr/bin/env bash
# What `make` and Tools/check.sh pipe `swift build` through: the build's output as it comes, less
# glibc's static-link notices (see CONTRIBUTING.md); exits 1 when the compiler warned about the
# project's own code, so that a warning fails the build where a newcomer would first see it.
# Usage: swift build 2>&1 | Tools/quiet-build.sh [ROOT]   (ROOT: the tree, default the current folder)
set -uo pipefail
root=$(cd "${1:-.}" && pwd)
warnings=0
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
        *"in statically linked applications requires at runtime the shared libraries from the glibc version used for linking"*) continue ;;
        *"warning: the use of \`mktemp' is dangerous"*) continue ;;
    esac
    printf '%s\n' "$line"
    # swiftc and clang: "/path/File.swift:12:5: warning: ...". The packages SwiftPM fetched into
    # .build are not ours to fix.
    if [[ $line =~ ^(/[^:]+):[0-9]+:[0-9]+:\ warning: ]]; then
        case ${BASH_REMATCH[1]} in
            "$root"/.build*) ;;
            "$root"/*) warnings=$((warnings + 1)) ;;
        esac
    fi
done
if [ "$warnings" -gt 0 ]; then
    echo "quiet-build: $warnings compiler warnings in the project's own code (above); the tree builds without any" >&2
    exit 1
fi
