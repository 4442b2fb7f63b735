#!/usr/bin/env python3
"""git, docker and `security` processes changing one keychain at once.

Usage: concurrency.py BIN OPS SEED

Four workers (the git helper, the docker helper, two `security` commands) each run OPS random
operations (store or update, get, erase) as separate processes, on keys of their own, all in
one keychain whose class keys are in the kernel keyring. Every answer is checked against the
worker's own model as it comes (a lost update shows as a stale read); no process may report a
locked database; at the end every key holds what a serial replay of each worker's operations
gives, and the keychain holds exactly that many items (no duplicates). Then eight `security`
processes race to add the same item: exactly one succeeds, seven get errSecDuplicateItem (45).
"""
import random, subprocess, sys, threading
from throwaway import throwaway_keychain

bin, ops, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
failures, lock = [], threading.Lock()


def run(argv, stdin=""):
    result = subprocess.run(argv, input=stdin.encode(), capture_output=True, env=env, timeout=120)
    text = (result.stdout + result.stderr).decode(errors="replace")
    if "locked" in text.lower() and "database" in text.lower() or "busy" in text.lower():
        fail(f"{argv[0].rsplit('/', 1)[-1]} {argv[1]}: {text.strip()}")
    return result


def fail(message):
    with lock:
        failures.append(message)


class Git:
    name = "git"

    def request(self, key, password=None):
        text = f"protocol=https\nhost=git-{key}.example.com\nusername=user\n"
        return text + (f"password={password}\n" if password else "") + "\n"

    def set(self, key, value):
        return run([bin + "/git-credential-keychain", "store"], self.request(key, value)).returncode == 0

    def get(self, key):
        out = run([bin + "/git-credential-keychain", "get"], self.request(key)).stdout.decode()
        return next((l[9:] for l in out.splitlines() if l.startswith("password=")), None)

    def erase(self, key):
        return run([bin + "/git-credential-keychain", "erase"], self.request(key)).returncode == 0


class Docker:
    name = "docker"

    def set(self, key, value):
        body = f'{{"ServerURL":"https://docker-{key}.example.com","Username":"robot","Secret":"{value}"}}'
        return run([bin + "/docker-credential-keychain", "store"], body).returncode == 0

    def get(self, key):
        result = run([bin + "/docker-credential-keychain", "get"], f"https://docker-{key}.example.com")
        if result.returncode != 0:
            return None
        out = result.stdout.decode()
        return out.split('"Secret":"', 1)[1].split('"', 1)[0]

    def erase(self, key):
        result = run([bin + "/docker-credential-keychain", "erase"], f"https://docker-{key}.example.com")
        return result.returncode == 0 or b"not found" in result.stdout


class Security:
    def __init__(self, n):
        self.name = f"security{n}"

    def set(self, key, value):
        argv = [bin + "/security", "add-internet-password", "-a", "user", "-s", f"{self.name}-{key}.example.com", "-r", "htps", "-U", "-w"]
        return run(argv, value + "\n").returncode == 0

    def get(self, key):
        result = run([bin + "/security", "find-internet-password", "-s", f"{self.name}-{key}.example.com", "-w"])
        return result.stdout.decode().strip() if result.returncode == 0 else None

    def erase(self, key):
        result = run([bin + "/security", "delete-internet-password", "-s", f"{self.name}-{key}.example.com"])
        return result.returncode in (0, 44)


def work(front, rng, model):
    for n in range(ops):
        key = f"k{rng.randrange(8)}"
        choice = rng.random()
        if choice < 0.45:
            value = f"{front.name}-{n}-{rng.randrange(1 << 30)}"
            if front.set(key, value):
                model[key] = value
            else:
                fail(f"{front.name}: store {key} failed")
        elif choice < 0.8:
            found = front.get(key)
            if found != model.get(key):
                fail(f"{front.name}: get {key} gave {found!r}, expected {model.get(key)!r}")
        else:
            if front.erase(key):
                model.pop(key, None)
            else:
                fail(f"{front.name}: erase {key} failed")


security = bin + "/security"
with throwaway_keychain(bin, "stress") as env:
    fronts = [Git(), Docker(), Security(1), Security(2)]
    models = [{} for _ in fronts]
    threads = [threading.Thread(target=work, args=(f, random.Random(seed * 10 + i), models[i])) for i, f in enumerate(fronts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for front, model in zip(fronts, models):
        for key in (f"k{i}" for i in range(8)):
            if front.get(key) != model.get(key):
                fail(f"final: {front.name} {key} is {front.get(key)!r}, a serial replay gives {model.get(key)!r}")
    dump = subprocess.run([security, "dump-keychain"], capture_output=True, env=env).stdout.decode()
    stored, expected = dump.count('class: "inet"'), sum(len(m) for m in models)
    if stored != expected:
        fail(f"final: {stored} items in the keychain, {expected} expected (duplicates or losses)")

    racers = [subprocess.Popen([security, "add-internet-password", "-a", "racer", "-s", "race.example.com", "-r", "htps", "-w"],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env) for _ in range(8)]
    for racer in racers:
        racer.stdin.write(b"race\n")
        racer.stdin.close()
    codes = sorted(racer.wait() for racer in racers)
    if codes != [0] + [45] * 7:
        fail(f"race: exit statuses {codes}, expected one 0 and seven 45")

for failure in failures[:20]:
    print(failure)
print(f"concurrency: 4 workers x {ops} operations, {len(failures)} failures")
sys.exit(1 if failures else 0)
