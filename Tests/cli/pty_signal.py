#!/usr/bin/env python3
"""Interrupts a command at a password prompt and checks that the terminal echoes again.

usage: pty_signal.py ctrl-c|sigterm|sighup PROMPT -- COMMAND [ARGS...]
Runs COMMAND on a pseudo-terminal, waits for PROMPT (answering earlier prompts of an add command
with "x"), then types Ctrl-C or sends the signal. Exits 0 when the command died of that signal
and the terminal's ECHO flag is back on; 1 otherwise; 99 when the prompt never came.
"""
import os, pty, select, signal, sys, termios, time

def main():
    how, prompt = sys.argv[1], sys.argv[2].encode()
    command = sys.argv[sys.argv.index("--") + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    seen, deadline = b"", time.time() + 10
    while prompt not in seen:
        if time.time() > deadline:
            os.kill(pid, signal.SIGKILL)
            print("prompt never appeared:", seen)
            sys.exit(99)
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            # An earlier prompt of the same command (the first of two): answer it.
            if b"password data for new item" in chunk and prompt not in chunk:
                time.sleep(0.05)
                os.write(fd, b"x\n")
            seen += chunk
    time.sleep(0.1)  # the prompt is written just before echo goes off
    if termios.tcgetattr(fd)[3] & termios.ECHO:
        time.sleep(0.5)
    if termios.tcgetattr(fd)[3] & termios.ECHO:
        print("echo was never turned off: the test would prove nothing")
        sys.exit(1)
    expected = {"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM, "sighup": signal.SIGHUP}[how]
    if how == "ctrl-c":
        os.write(fd, b"\x03")  # the line discipline turns it into SIGINT
    else:
        os.kill(pid, expected)
    _, status = os.waitpid(pid, 0)
    echo_on = bool(termios.tcgetattr(fd)[3] & termios.ECHO)
    died = os.WIFSIGNALED(status) and os.WTERMSIG(status) == expected
    print(f"{how}: died of signal: {died}, echo restored: {echo_on}")
    sys.exit(0 if died and echo_on else 1)

main()
