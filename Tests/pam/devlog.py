#!/usr/bin/env python3
"""Receives syslog datagrams on a UNIX socket (default /dev/log) and appends them to a file,
so tests can read what pam_syslog wrote. Stops by itself after SECONDS.

usage: devlog.py LOGFILE [SECONDS] [SOCKET]
"""
import os, signal, socket, sys, time

# A TERM from the test's cleanup must still remove the socket.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

log, seconds = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 300
path = sys.argv[3] if len(sys.argv) > 3 else "/dev/log"
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
s.settimeout(0.5)
deadline = time.time() + seconds
try:
    with open(log, "a", buffering=1) as out:
        while time.time() < deadline:
            try:
                out.write(s.recv(65536).decode(errors="replace") + "\n")
            except socket.timeout:
                pass
finally:
    os.unlink(path)
