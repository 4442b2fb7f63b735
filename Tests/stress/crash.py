#!/usr/bin/env python3
"""SIGKILL a writer at random moments; after each kill the keychain must be whole.

Usage: crash.py WRITER ROUNDS SEED

Each round starts keychain-stress-writer on one keychain file, lets it add, update, delete and
change the password (half the time rotating the class keys) for a random 5-250 ms, and kills it
with SIGKILL. Then: PRAGMA integrity_check is ok; the keychain opens with the last acknowledged
password or, if a password change was under way, with the one it was changing to (never
neither); and every item holds
what the last acknowledged write gave it, except the one item a killed write was touching,
which may hold its old or its new value. Prints one line per failure and a summary; exits 1
on any failure.
"""
import os, random, signal, sqlite3, subprocess, sys, tempfile, threading, time

writer, rounds, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
folder = tempfile.mkdtemp(prefix="keychain-crash-")
os.chmod(folder, 0o700)
path = os.path.join(folder, "crash.keychain-db")
failures = []


def run(*args, password):
    return subprocess.run([writer, *args], input=(password + "\n").encode(), capture_output=True, timeout=60)


def dump(password):
    result = run("dump", path, password=password)
    if result.returncode == 51:
        return None
    if result.returncode != 0:
        failures.append(f"dump failed: {result.stderr.decode(errors='replace').strip()}")
        return {}
    return dict(line.split(" ", 1) for line in result.stdout.decode().splitlines())


password = "pw-start"
assert run("create", path, password=password).returncode == 0
model = {}
kills_in_write = 0
for round in range(rounds):
    child = subprocess.Popen([writer, "write", path, str(rng.randrange(1 << 40))], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdin.write((password + "\n").encode())
    child.stdin.close()
    chunks = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: child.stdout.read1(65536), b"")))
    reader.start()
    time.sleep(rng.uniform(0.005, 0.25))
    child.send_signal(signal.SIGKILL)
    child.wait()
    reader.join()
    out, err = b"".join(chunks), child.stderr.read()
    if child.returncode != -signal.SIGKILL:
        failures.append(f"round {round}: the writer stopped by itself ({child.returncode}): {err.decode(errors='replace').strip()}")
        break
    # Replay what was acknowledged; remember what was under way.
    pending = None
    for line in out.decode().splitlines():
        if line == "ok":
            op = pending
            pending = None
            if op[0] == "passwd":
                password = op[1]
            elif op[0] == "delete":
                model.pop(op[1], None)
            else:
                model[op[1]] = op[2]
        elif line.startswith("try "):
            pending = line.split(" ", 3)[1:]
    if pending:
        kills_in_write += 1

    conn = sqlite3.connect(path)
    check = conn.execute("PRAGMA integrity_check").fetchone()[0]
    conn.close()
    if check != "ok":
        failures.append(f"round {round}: integrity_check: {check}")

    candidates = [password] + ([pending[1]] if pending and pending[0] == "passwd" else [])
    found = None
    for candidate in candidates:
        found = dump(candidate)
        if found is not None:
            password = candidate
            break
    if found is None:
        failures.append(f"round {round}: neither {candidates} unlocks the keychain")
        break

    expected = dict(model)
    if pending and pending[0] != "passwd":
        key = pending[1]
        after = None if pending[0] == "delete" else pending[2]
        if found.get(key) == after:
            if after is None:
                expected.pop(key, None)
            else:
                expected[key] = after
    if found != expected:
        lost = {k: (expected.get(k, "-")[:20], found.get(k, "-")[:20]) for k in set(expected) | set(found) if expected.get(k) != found.get(k)}
        failures.append(f"round {round}: items differ from the acknowledged writes (expected, found): {lost}")
        break
    model = found

for failure in failures:
    print(failure)
print(f"crash: {rounds} kills ({kills_in_write} during a write), {len(model)} items at the end, {len(failures)} failures")
subprocess.run(["rm", "-rf", folder])
sys.exit(1 if failures else 0)
