#!/usr/bin/env python3
"""Runs whole processes side by side and reports their median wall times.

Usage: timing.py SPEC.json > RESULT.json
SPEC: {"rounds": 40, "warmup": 5, "cases": {NAME: {"argv": [...], "stdin": "...", "expect": "...", "env": {...},
                                                  "status": 0}}}
(`env`: variables this case runs with on top of the environment; `status`: the exit status every run
must have, 0 unless a floor is measured on purpose with a client that must fail.)

Cases run in turn within each round (a, b, c, a, b, c, ...), so a slow moment of the machine
falls on every case alike. Every run must exit 0 and print `expect`: a helper that fails fast
would otherwise look fast. Peak memory is peakrss.c's job, not this one's: a child forked from
Python would carry Python's own high-water mark through exec.
"""
import json, os, statistics, subprocess, sys, time

spec = json.load(open(sys.argv[1]))
rounds, warmup = spec.get("rounds", 40), spec.get("warmup", 5)
cases = spec["cases"]
times = {name: [] for name in cases}


def run(case):
    """One run's wall time. posix_spawn (vfork and exec) rather than fork: copying this Python
    process would add a millisecond to every case and flatten the ratios."""
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    devnull = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, read_in, 0), (os.POSIX_SPAWN_DUP2, write_out, 1),
               (os.POSIX_SPAWN_DUP2, devnull, 2)]
    start = time.perf_counter()
    pid = os.posix_spawnp(case["argv"][0], case["argv"], {**environment, **case.get("env", {})}, file_actions=actions)
    for fd in (read_in, write_out, devnull):
        os.close(fd)
    os.write(write_in, case.get("stdin", "").encode())
    os.close(write_in)
    chunks = []
    while chunk := os.read(read_out, 65536):
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - start
    os.close(read_out)
    out = b"".join(chunks)
    if os.waitstatus_to_exitcode(status) != case.get("status", 0) or case.get("expect", "").encode() not in out:
        sys.exit(f"timing: {case['argv']} failed (status {status}): {out[:200]!r}")
    return elapsed


environment = dict(os.environ)
for n in range(warmup + rounds):
    for name, case in cases.items():
        elapsed = run(case)
        if n >= warmup:
            times[name].append(elapsed)

json.dump({name: {"median_ms": statistics.median(times[name]) * 1000,
                  "runs": len(times[name])} for name in cases}, sys.stdout)
