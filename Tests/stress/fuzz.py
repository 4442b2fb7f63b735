#!/usr/bin/env python3
"""Seeded random input to the credential helpers: no crash, no hang, only documented statuses.

Usage: fuzz.py BIN CASES SEED

Feeds CASES random requests to each of git-credential-keychain (get, store, erase) and
docker-credential-keychain (store, get, erase, list) over one unlocked keychain: git protocol
messages with random keys, values and line ends; JSON with wrong types, huge numbers, deep
nesting and truncation; server URLs with negative, huge and non-numeric ports, IPv6 brackets,
NUL bytes, invalid UTF-8 and 1 MB lines. Every run must end within 20 s, by exit (not a
signal), with 0 (git) or 0/1 (docker), and git's answer must be key=value lines only.
The seed makes a failure reproducible: it is printed with the case.
"""
import json, random, subprocess, sys
from throwaway import throwaway_keychain

bin, cases, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
failures = []

ATOMS = [b"", b"a", b"example.com", b"host:8080", b"[::1]:443", b"[fe80::1", b"]", b":", b"host:-1", b"host:0",
         b"host:65536", b"host:99999999999999999999999", b"-1", b"-9223372036854775809", b"18446744073709551616",
         b"1e309", b"NaN", b"https://", b"http://u:p@h/p?q#f", b"//////a/../../b", b"%00", b"%zz", b"\x00", b"a\x00b",
         b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", "ü€𝄞".encode(), b"\r", b"\t", b" ", b"=", b"==", b"[]", b"\\",
         b"\"", b"'", b"unix:///var/run/docker.sock", b"cert", b"htps", b"x" * 70000]


def value():
    if rng.random() < 0.02:
        return b"v" * (1 << 20)          # a 1 MB line
    return b"".join(rng.choice(ATOMS) for _ in range(rng.randrange(0, 4)))


def git_message():
    keys = [b"protocol", b"host", b"path", b"username", b"password", b"url", b"capability[]", b"wwwauth[]",
            b"password_expiry_utc", b"oauth_refresh_token", b"authtype", b"credential", b"ephemeral", b"state[]",
            b"continue", b"quit", b"", b"=", b"\x00"]
    lines = []
    for _ in range(rng.randrange(0, 8)):
        key = rng.choice(keys) if rng.random() < 0.9 else value()
        lines.append(key + (b"=" + value() if rng.random() < 0.95 else b""))
    end = rng.choice([b"\n\n", b"\n", b"", b"\r\n\r\n"])
    return b"\n".join(lines) + end


def json_value(depth=0):
    kind = rng.randrange(9 if depth < 30 else 5)
    if kind == 0: return None
    if kind == 1: return rng.choice([True, False])
    if kind == 2: return rng.choice([0, -1, 2 ** 64, -(2 ** 63) - 1, 10 ** 400, 1.5e308])
    if kind in (3, 4): return value().decode("utf-8", "replace")
    if kind == 5: return [json_value(depth + 1) for _ in range(rng.randrange(3))]
    if kind == 6: return {rng.choice(["ServerURL", "serverurl", "Username", "Secret", "x"]): json_value(depth + 1)}
    if kind == 7: return json_value(depth + 25) if rng.random() < 0.5 else [json_value(depth + 1)]
    return value().decode("latin-1")


def docker_input(action):
    if action == "store":
        if rng.random() < 0.15:
            return value()
        body = {k: json_value() for k in ["ServerURL", "Username", "Secret", "serverURL"] if rng.random() < 0.8}
        text = json.dumps(body).encode()
        if rng.random() < 0.1:
            text = text[: rng.randrange(len(text) + 1)]
        if rng.random() < 0.05:
            text = b"[" * 10000 + b"]" * 10000
        return text
    return value()


def check(argv, data, allowed, parse_git=False):
    try:
        result = subprocess.run(argv, input=data, capture_output=True, env=env, timeout=20)
    except subprocess.TimeoutExpired:
        failures.append(f"hang: {argv[-2:]} on {data[:80]!r}")
        return
    if result.returncode not in allowed:
        failures.append(f"status {result.returncode}: {argv[-2:]} on {data[:80]!r}: {result.stderr[:200]!r}")
    elif parse_git and any(b"=" not in line or b"\x00" in line for line in result.stdout.splitlines()):
        failures.append(f"malformed answer {result.stdout[:120]!r}: {argv[-2:]} on {data[:80]!r}")


with throwaway_keychain(bin, "fuzz") as env:
    for n in range(cases):
        action = rng.choice(["get", "store", "erase"])
        check([bin + "/git-credential-keychain", action], git_message(), {0}, parse_git=action == "get")
        action = rng.choice(["store", "get", "erase", "list"])
        check([bin + "/docker-credential-keychain", action], docker_input(action), {0, 1})
    # The keychain still works after all of it.
    ok = subprocess.run([bin + "/git-credential-keychain", "store"], input=b"protocol=https\nhost=after.example.com\nusername=u\npassword=p\n\n", env=env)
    got = subprocess.run([bin + "/git-credential-keychain", "get"], input=b"protocol=https\nhost=after.example.com\n\n", env=env, capture_output=True)
    if ok.returncode != 0 or b"password=p\n" not in got.stdout:
        failures.append("the keychain does not work after the fuzzing")

for failure in failures[:20]:
    print(failure)
print(f"fuzz: {cases} git and {cases} docker requests (seed {seed}), {len(failures)} failures")
sys.exit(1 if failures else 0)
