#!/usr/bin/env python3
"""Looks for a typed password in the memory of a command that is waiting at a later prompt.

usage: pty_memory.py SECRET -- COMMAND [ARGS...]   (root: the tool is undumpable)
Runs COMMAND on a pseudo-terminal (e.g. `security create-keychain one two`), types SECRET at its
first password prompt and again at the retype prompt, waits for the next keychain's prompt, and
reads every readable mapping of the process from /proc/PID/mem. Exits 0 when SECRET is nowhere
in it, 1 when it is (printing where), 99 when the prompts never came. Covers the retyped copy
that Terminal.readSecret compares and the terminal's stdio buffer.
"""
import os, pty, select, signal, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memscan

def wait_for(fd, text, seen, deadline):
    while text not in seen:
        if time.time() > deadline:
            return None
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return None
            if not chunk:
                return None
            seen += chunk
    return seen

def main():
    secret = sys.argv[1].encode()
    command = sys.argv[sys.argv.index("--") + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    deadline = time.time() + 20
    seen = b""
    for prompt in (b"password for new keychain: ", b"retype password for new keychain: "):
        seen = wait_for(fd, prompt, seen, deadline)
        if seen is None:
            os.kill(pid, signal.SIGKILL)
            sys.exit(99)
        seen = seen.replace(prompt, b"", 1)
        time.sleep(0.05)
        os.write(fd, secret + b"\n")
    # The second keychain's prompt: the first keychain is made, its password used and done with.
    seen = wait_for(fd, b"password for new keychain: ", seen, deadline)
    if seen is None:
        os.kill(pid, signal.SIGKILL)
        sys.exit(99)
    time.sleep(0.2)
    found = memscan.find(pid, secret)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    if found:
        print("the password is still in memory at:", ", ".join(found))
        sys.exit(1)
    sys.exit(0)

main()
