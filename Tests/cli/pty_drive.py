#!/usr/bin/env python3
"""Runs a command on a pseudo-terminal and answers its prompts, as a person at a terminal would.

usage: pty_drive.py PROMPT=ANSWER [PROMPT=ANSWER ...] -- COMMAND [ARGS...]
Prints everything the terminal showed, then exits with the command's status. Fails (status 99)
if a prompt does not appear within 10 seconds.
"""
import os, pty, select, sys, time

def main():
    split = sys.argv.index("--")
    answers = [a.split("=", 1) for a in sys.argv[1:split]]
    command = sys.argv[split + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        # The child gets the pseudo-terminal as its controlling terminal and as stdin.
        os.execvp(command[0], command)
    seen = b""
    deadline = time.time() + 10
    for prompt, answer in answers:
        while prompt.encode() not in seen:
            if time.time() > deadline:
                sys.stdout.write(seen.decode(errors="replace"))
                print(f"\n[pty_drive] prompt {prompt!r} never appeared")
                os.kill(pid, 9)
                sys.exit(99)
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
        seen = seen.replace(prompt.encode(), b"<" + prompt.encode() + b">", 1)
        time.sleep(0.05)
        os.write(fd, answer.encode() + b"\n")
    while True:
        try:
            r, _, _ = select.select([fd], [], [], 5)
            if not r:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            seen += chunk
        except OSError:
            break
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(seen.decode(errors="replace"))
    sys.exit(os.waitstatus_to_exitcode(status))

main()
