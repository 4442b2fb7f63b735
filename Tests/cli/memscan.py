#!/usr/bin/env python3
"""Looks for a secret in every readable mapping of a running process (root: the tools are undumpable).

usage: memscan.py PID SECRET   exits 0 when SECRET is nowhere, 1 when found (printing where).
"""
import re, sys

def find(pid, secret):
    found = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", line)
            start, end, perms = int(m.group(1), 16), int(m.group(2), 16), m.group(3)
            if "r" not in perms or end - start > 1 << 30:
                continue
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except OSError:
                continue
            parts = line.split()
            for hit in re.finditer(re.escape(secret), data):
                found.append(f"{parts[5] if len(parts) > 5 else '[anon]'}+{hit.start():#x}")
    return found

if __name__ == "__main__":
    where = find(int(sys.argv[1]), sys.argv[2].encode())
    if where:
        print("the secret is still in memory at:", " ".join(where))
    sys.exit(1 if where else 0)
