#!/usr/bin/python3
"""Every module a Swift file imports must be one its target declares in Package.swift.

The layers only work downwards (C shims <- KeychainCore <- front ends; see DESIGN.md and
ARCHITECTURE.md). SwiftPM lets a target import a module that is merely built before it, or one
that another dependency pulls in, so an upward or undeclared import can compile today and break
the layering unseen. This check reads the targets (name, path, dependencies, exclude) from
Package.swift and every `import X` of their Swift files (`@testable`, `@_exported`,
`@_implementationOnly`, `public`/`package`/`internal` imports and `import struct X.Y` included),
and fails naming each import that is neither a declared dependency nor a module of the toolchain.

Usage: Tools/check-imports.py [PACKAGE_DIR]   (default: the folder above this script)
Exit status: 0 clean, 1 undeclared imports, 2 Package.swift not understood.
"""
import os
import re
import sys

# Modules of the Swift toolchain and the platform: importable without a package dependency.
SYSTEM_MODULES = {
    "Swift", "_Concurrency", "_StringProcessing", "RegexBuilder", "Observation", "Distributed", "Synchronization",
    "Glibc", "Musl", "Darwin", "WinSDK", "Android", "Bionic",
    "Foundation", "FoundationEssentials", "FoundationInternationalization", "FoundationNetworking", "FoundationXML",
    "CoreFoundation", "Dispatch", "XCTest", "Testing",
}

TARGET_KINDS = ("target", "executableTarget", "testTarget", "systemLibrary", "binaryTarget", "plugin", "macro")


def strip_comments(text):
    """Swift source (or Package.swift) with comments and string literals blanked out, lines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            # Swift block comments nest.
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('"""', i):
            j = text.find('"""', i + 3)
            j = n if j < 0 else j + 3
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])   # kept: Package.swift's names are string literals
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def balanced(text, start):
    """The text between the bracket at `start` and its partner."""
    pairs = {"(": ")", "[": "]"}
    stack, i = [pairs[text[start]]], start + 1
    while i < len(text) and stack:
        c = text[i]
        if c in pairs:
            stack.append(pairs[c])
        elif c == stack[-1]:
            stack.pop()
        elif c == '"':
            i = text.index('"', i + 1)
        i += 1
    return text[start + 1:i - 1]


def argument(call, label):
    """The value text of `label:` at the top level of a call's arguments, or None."""
    depth, i = 0, 0
    while i < len(call):
        c = call[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == '"':
            i = call.index('"', i + 1)
        elif depth == 0 and re.match(r"\b%s\s*:" % label, call[i:]) and (i == 0 or not (call[i - 1].isalnum() or call[i - 1] == "_")):
            rest = call[call.index(":", i) + 1:].lstrip()
            if rest[:1] in "([":
                return rest[0] + balanced(rest, 0)
            return re.match(r'"[^"]*"|[^,]*', rest).group(0).strip()
        i += 1
    return None


def targets(package_swift):
    text = strip_comments(open(package_swift).read())
    found = []
    for m in re.finditer(r"\.(%s)\s*\(" % "|".join(TARGET_KINDS), text):
        call = balanced(text, m.end() - 1)
        name = argument(call, "name")
        if not name or not name.startswith('"'):
            continue
        kind, name = m.group(1), name.strip('"')
        path = argument(call, "path")
        if path and path.startswith('"'):
            path = path.strip('"')
        else:
            path = os.path.join("Tests" if kind == "testTarget" else "Sources", name)
        deps = set()
        deps_text = argument(call, "dependencies") or ""
        # .product(name: "P", package: "..."), .target(name: "T"), .byName(name: "B"): the module is the name.
        for d in re.finditer(r"\.(product|target|byName)\s*\(", deps_text):
            inner = balanced(deps_text, d.end() - 1)
            dep = argument(inner, "name")
            if dep:
                deps.add(dep.strip('"'))
        plain = re.sub(r"\.(product|target|byName)\s*\((?:[^()]|\([^()]*\))*\)", "", deps_text)
        deps.update(re.findall(r'"([^"]+)"', plain))
        exclude = re.findall(r'"([^"]+)"', argument(call, "exclude") or "")
        found.append({"kind": kind, "name": name, "path": os.path.normpath(path), "deps": deps,
                      "exclude": [os.path.normpath(os.path.join(path, e)) for e in exclude]})
    return found


IMPORT = re.compile(
    r"^\s*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*"                       # @testable, @_exported, @_implementationOnly, @preconcurrency
    r"(?:(?:public|package|internal|fileprivate|private)\s+)?"   # access-level imports
    r"import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?"
    r"([A-Za-z_][A-Za-z0-9_]*)")


def imports(path):
    for number, line in enumerate(strip_comments(open(path, encoding="utf-8").read()).split("\n"), 1):
        m = IMPORT.match(line)
        if m:
            yield number, m.group(1)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    try:
        found = targets(os.path.join(root, "Package.swift"))
    except (OSError, ValueError) as error:
        print(f"check-imports: cannot read the targets of Package.swift: {error}", file=sys.stderr)
        return 2
    if not found:
        print("check-imports: no targets found in Package.swift", file=sys.stderr)
        return 2
    names = {t["name"] for t in found}
    # A file belongs to the target with the longest path that contains it (pam/shim inside pam/...).
    by_path = sorted(found, key=lambda t: len(t["path"]), reverse=True)
    problems, files = [], 0
    for target in found:
        folder = os.path.join(root, target["path"])
        for parent, dirs, names_here in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for file in sorted(names_here):
                if not file.endswith(".swift"):
                    continue
                relative = os.path.relpath(os.path.join(parent, file), root)
                owner = next(t for t in by_path if relative == t["path"] or relative.startswith(t["path"] + os.sep))
                if owner is not target or any(relative == e or relative.startswith(e + os.sep) for e in target["exclude"]):
                    continue
                files += 1
                for number, module in imports(os.path.join(root, relative)):
                    if module in target["deps"] or module in SYSTEM_MODULES:
                        continue
                    why = "a target of this package it does not depend on" if module in names else "not a dependency of the target"
                    problems.append(f"{relative}:{number}: import {module}: {why} "
                                    f"(target {target['name']} declares: {', '.join(sorted(target['deps'])) or 'nothing'})")
    for problem in problems:
        print(problem)
    print(f"check-imports: {len(found)} targets, {files} Swift files, {len(problems)} undeclared imports")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
