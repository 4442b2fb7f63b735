#!/usr/bin/env python3
"""Seeded random sources for `security import-secrets`: no crash, no hang, documented statuses.

Usage: fuzz_import.py BIN CASES SEED

Each case hands import-secrets one damaged source: a gnome-keyring keyring file (an encrypted
one written field by field from gkm-secret-binary.c's layout by keyring_file.py, or the
plain-text format), then flipped, inserted and removed bytes, 32-bit fields set to
extremes (lengths past the end, 10^9 and 2^32-1 KDF iterations), truncation; a git
credential-store file of random lines; a docker config.json of random JSON. Every run must end
within 20 s, by exit (not a signal), with 0, 45 (a different secret already there), 51 (wrong
password), 93 (damaged) or 206 (refused input). The seed makes a failure reproducible.
"""
import json, os, random, struct, subprocess, sys, tempfile
from keyring_file import encrypted_keyring, plain_keyring
from throwaway import throwaway_keychain

bin, cases, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
failures = []
PASSWORD = b"fuzz-pw"
ALLOWED = {0, 45, 51, 93, 206}


def seeded_salt():
    return bytes(rng.randrange(256) for _ in range(8))


def random_items():
    items = []
    for n in range(rng.randrange(0, 4)):
        attrs = [("application", "chromium"), ("user", "u"), ("server", "s.example"), ("port", 443), ("x", "y"), ("xdg:schema", "a.b")]
        items.append((rng.choice(["Chromium Safe Storage", "", "lbl %d" % n]), rng.choice(["s", "", "k3y=="]),
                      rng.sample(attrs, rng.randrange(0, 4)), rng.choice([0, 1, 2, 0x100, 77])))
    return items


def damage(data):
    data = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        if not data:
            break
        at = rng.randrange(len(data))
        kind = rng.randrange(6)
        if kind == 0:
            data[at] ^= rng.randrange(1, 256)
        elif kind == 1:
            data.insert(at, rng.randrange(256))
        elif kind == 2:
            del data[at]
        elif kind == 3:
            data[at:at + 4] = rng.choice([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\0\0\0\0", struct.pack(">I", 10 ** 9)])
        elif kind == 4:
            del data[at:]
        else:
            data[at:at] = rng.choice([b"\n[x]\n", b"=\\", b"\0", b"[keyring]\n"])
    return bytes(data)


def git_file():
    atoms = ["https://", "http://", "u", ":", "@", "p", "%40", "%zz", "%0a", "host", ":8443", "/path", "[::1]", "?q", "#f",
             "cert:///x", "\x00", "ü", " ", "//", "://"]
    return "\n".join("".join(rng.choice(atoms) for _ in range(rng.randrange(0, 8))) for _ in range(rng.randrange(0, 6))).encode()


def docker_file():
    def value(depth=0):
        kind = rng.randrange(8 if depth < 4 else 4)
        if kind == 0:
            return rng.choice([None, True, 1, 2 ** 70, -1.5])
        if kind in (1, 2, 3):
            return rng.choice(["", "dTpw", "not base64!", "OnB3", "dTpw\n", "<token>", "keychain", "desktop", "x" * 1000])
        if kind in (4, 5):
            return {rng.choice(["auth", "identitytoken", "username", "password", "email", "registrytoken"]): value(depth + 1)
                    for _ in range(rng.randrange(0, 4))}
        if kind == 6:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        return {rng.choice(["https://index.docker.io/v1/", "r.example:5000", "ftp://x", "", "[::1]:5000", "h:99999"]): value(depth + 1)}
    body = {"auths": value(1) if rng.random() < 0.3 else
            {rng.choice(["https://index.docker.io/v1/", "r.example:5000", "ftp://x", "", "h:port"]): value(2) for _ in range(3)}}
    if rng.random() < 0.4:
        body["credsStore"] = value(3)
    text = json.dumps(body).encode()
    if rng.random() < 0.15:
        text = text[: rng.randrange(len(text) + 1)]
    return text


def run(argv, env, what):
    try:
        result = subprocess.run(argv, capture_output=True, env=env, timeout=20, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        failures.append(f"hang: {what}")
        return
    if result.returncode not in ALLOWED:
        failures.append(f"status {result.returncode}: {what}: {result.stderr[-300:]!r}")


with throwaway_keychain(bin, "fuzz-import") as env:
    folder = tempfile.mkdtemp(prefix="fuzz-import-", dir=env["HOME"])
    security = bin + "/security"
    for n in range(cases):
        kind = n % 3
        if kind == 0:
            items = random_items()
            source = encrypted_keyring(items, PASSWORD, seeded_salt()) if rng.random() < 0.6 else plain_keyring(items)
            if rng.random() < 0.9:
                source = damage(source)
            path = os.path.join(folder, "fuzzkr.keyring")
            open(path, "wb").write(source)
            run([security, "import-secrets", "-p", PASSWORD.decode(), "--keyring", path], env, f"case {n}: keyring {source[:60]!r}")
        elif kind == 1:
            path = os.path.join(folder, "credentials")
            open(path, "wb").write(git_file())
            run([security, "import-secrets", "--git-credentials", path], env, f"case {n}: git {open(path, 'rb').read()[:80]!r}")
        else:
            path = os.path.join(folder, "config.json")
            open(path, "wb").write(docker_file())
            run([security, "import-secrets", "--docker-config", path], env, f"case {n}: docker {open(path, 'rb').read()[:80]!r}")
    # A good keyring still imports after all of it.
    path = os.path.join(folder, "after.keyring")
    open(path, "wb").write(encrypted_keyring([("after", "after-secret", [("app", "after")], 0)], PASSWORD, seeded_salt()))
    ok = subprocess.run([security, "import-secrets", "-p", PASSWORD.decode(), "--keyring", path], env=env, capture_output=True)
    got = subprocess.run([security, "find-generic-password", "-l", "after", "-w", "after"], env=env, capture_output=True)
    if ok.returncode != 0 or got.stdout != b"after-secret\n":
        failures.append(f"a good keyring does not import after the fuzzing: {ok.stderr[-200:]!r} {got.stdout!r}")
    for name in ("fuzzkr", "after"):
        subprocess.run([security, "delete-keychain", name], env=env, capture_output=True)

for failure in failures[:20]:
    print(failure)
print(f"fuzz: {cases} import-secrets sources (seed {seed}), {len(failures)} failures")
sys.exit(1 if failures else 0)
