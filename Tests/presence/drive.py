# Tests/presence's cases, run as root inside run.sh's namespace (a private system bus and polkitd).
# Usage: drive.py BIN KEYCHAIN USER PASSWORD WORKDIR. Prints "ok - ..." / "not ok - ..." lines.
import os
import pty
import select
import subprocess
import sys
import time

BIN, KEYCHAIN, USER, PASSWORD, WORK = sys.argv[1:6]
AGENT = os.path.join(BIN, "agent.py")  # copied beside the binaries: the checkout may be private
AS_USER = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups"]
ENV = {"HOME": f"{WORK}/home", "USER": USER, "PATH": "/usr/bin:/bin", "LC_ALL": "C"}
failures = 0


def check(ok, what, detail=""):
    global failures
    print(("ok - " if ok else "not ok - ") + what + ("" if ok else f"  [{detail}]"), flush=True)
    failures += 0 if ok else 1


def env(**extra):
    e = dict(ENV)
    e.update(extra)
    return e


def run(argv, stdin=b"", **extra):
    p = subprocess.run(AS_USER + argv, input=stdin, capture_output=True, env=env(**extra), timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def with_agent(argv, mode, **extra):
    """Runs argv as the user (no terminal), with the tests' agent in `mode` serving it (None: no
    agent). Returns (status, stdout, seconds, requests the agent got)."""
    count_file = f"{WORK}/requests"
    open(count_file, "w").close()
    os.chmod(count_file, 0o666)
    proc = subprocess.Popen(AS_USER + ["bash", "-c", 'read go; exec "$@"', "subject"] + argv, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env(**extra), start_new_session=True)
    agent = None
    if mode:
        agent = subprocess.Popen(AS_USER + ["/usr/bin/python3", AGENT, str(proc.pid), mode, count_file],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env())
        line = agent.stdout.readline().decode()
        if "registered" not in line:
            check(False, "the tests' agent registers", line + agent.stdout.read().decode())
    start = time.monotonic()
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    try:
        out = proc.stdout.read().decode(errors="replace")
        status = proc.wait(timeout=90)
    finally:
        if agent:
            agent.kill()
            agent.wait()
    seconds = time.monotonic() - start
    with open(count_file) as f:
        requests = len(f.read().splitlines())
    return status, out, seconds, requests


def on_terminal(argv, answer):
    """Runs argv as the user on a pseudo-terminal of its own (its controlling terminal), answering
    pkttyagent's password prompt with `answer`. Returns (status, everything the terminal showed)."""
    master, slave = pty.openpty()
    name = os.ttyname(slave)

    def controlling_terminal():
        os.setsid()
        os.close(os.open(name, os.O_RDWR))

    proc = subprocess.Popen(AS_USER + argv, stdin=slave, stdout=slave, stderr=slave, env=env(TERM="dumb"),
                            preexec_fn=controlling_terminal)
    os.close(slave)
    shown, answered, deadline = b"", False, time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
            if not answered and b"Password:" in shown:
                time.sleep(0.3)  # pkttyagent turns echo off after printing the prompt
                os.write(master, answer.encode() + b"\n")
                answered = True
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=30), shown.decode(errors="replace")


security, probe = f"{BIN}/security", f"{BIN}/keychain-presence-probe"
find_cli = [security, "find-generic-password", "-s", "presence", "-a", "cli", "-w", KEYCHAIN]

# The `security` command: an item made with --require user-presence.
status, out, err = run([security, "add-generic-password", "-s", "presence", "-a", "cli", "--require", "user-presence",
                        "-X", "636c692d736563726574", KEYCHAIN])
check(status == 0, "security add-generic-password --require user-presence", err)
status, out, err = run([security, "find-generic-password", "-s", "presence", "-a", "cli", KEYCHAIN])
check(status == 0 and "cli-secret" not in out, "find without -w shows the attributes and asks nobody", f"{status} {out} {err}")

status, shown = on_terminal(find_cli, PASSWORD)
check(status == 0 and "cli-secret" in shown and "AUTHENTICATING FOR org.keychain-linux.user-presence" in shown
      and "reading the password of service presence, account cli" in shown,
      "find -w on a terminal: says why, pkttyagent asks, the right password gives the secret", f"{status} {shown!r}")
status, shown = on_terminal(find_cli, "wrong-password")
check(status == 51 and "cli-secret" not in shown, "a wrong password: errSecAuthFailed (exit 51), no secret",
      f"{status} {shown!r}")

status, out, seconds, requests = with_agent(find_cli, None)
check(status == 36 and "cli-secret" not in out and seconds < 20 and "unlock-keychain" not in out
      and "the item asks for you" in out,
      f"no agent: errSecInteractionNotAllowed (exit 36) in {seconds:.1f} s, and says why", f"{status} {out}")

# git's helper on such an item, with nobody to ask: nothing for git, one line saying why.
status, out, err = run([security, "add-internet-password", "-s", "git.presence.example", "-a", "ann", "-r", "htps",
                        "--require", "user-presence", "-X", "6769742d736563726574", KEYCHAIN])
helper = subprocess.run(AS_USER + [f"{BIN}/git-credential-keychain", "get"], input=b"protocol=https\nhost=git.presence.example\n\n",
                        capture_output=True, env=env(KEYCHAIN_PATH=KEYCHAIN), timeout=60)
check(status == 0 and helper.returncode == 0 and helper.stdout == b"" and b"user presence" in helper.stderr,
      "git-credential-keychain with nobody to ask: no answer for git, one line about user presence",
      f"{status} {helper.returncode} {helper.stdout!r} {helper.stderr!r}")
status, out, seconds, requests = with_agent(find_cli, "cancel")
check(status == 128 and requests == 1 and "cli-secret" not in out,
      "the agent dismisses: errSecUserCanceled (exit 128)", f"{status} {requests} {out}")
status, out, seconds, requests = with_agent(find_cli, "hang", KEYCHAIN_PRESENCE_TIMEOUT="3")
check(status == 36 and 2.5 < seconds < 30 and "cli-secret" not in out,
      f"an agent that never answers: errSecInteractionNotAllowed after the bound ({seconds:.1f} s for 3 s)", f"{status} {out}")
status, out, seconds, requests = with_agent([security, "delete-generic-password", "-s", "presence", "-a", "cli", KEYCHAIN], None)
still, _, _ = run([security, "find-generic-password", "-s", "presence", "-a", "cli", KEYCHAIN])
check(status == 36 and still == 0, "delete without anyone to ask: refused (exit 36), the item kept", f"{status} {still} {out}")
status, out, seconds, requests = with_agent([security, "delete-generic-password", "-s", "presence", "-a", "cli", KEYCHAIN],
                                            f"password:{PASSWORD}")
gone, _, _ = run([security, "find-generic-password", "-s", "presence", "-a", "cli", KEYCHAIN])
check(status == 0 and requests == 1 and gone == 44, "delete once the user is authenticated", f"{status} {requests} {gone} {out}")

# The Security module and LocalAuthentication, through the probe.
def probe_run(scenario, mode=None):
    status, out, seconds, requests = with_agent([probe, KEYCHAIN, scenario], mode)
    return status, out.strip().splitlines(), requests


grant = f"password:{PASSWORD}"
status, lines, requests = probe_run("add")
check(lines == ["status 0", "status 0"], "SecItemAdd with kSecAccessControlUserPresence", lines)
status, lines, requests = probe_run("read", grant)
check(lines == ["status 0 guarded-secret"] and requests == 1, "SecItemCopyMatching asks once and returns the secret", (lines, requests))
status, lines, requests = probe_run("read", "password:not-it")
check(lines == ["status -25293"] and requests == 1, "a wrong password: errSecAuthFailed", (lines, requests))
status, lines, requests = probe_run("read", "cancel")
check(lines == ["status -128"], "dismissed: errSecUserCanceled", lines)
status, lines, requests = probe_run("read")
check(lines == ["status -25308"], "no agent: errSecInteractionNotAllowed", lines)
status, lines, requests = probe_run("read-fail", grant)
check(lines == ["status -25308"] and requests == 0, "kSecUseAuthenticationUIFail: errSecInteractionNotAllowed, nobody asked", (lines, requests))
status, lines, requests = probe_run("read-skip", grant)
check(lines == ["status 0 open"] and requests == 0, "kSecUseAuthenticationUISkip: the item left out, nobody asked", (lines, requests))
status, lines, requests = probe_run("attributes", grant)
check(lines == ["status 0 guarded,open"] and requests == 0, "attributes only: nobody asked", (lines, requests))
status, lines, requests = probe_run("context-reuse", grant)
check(lines == ["status 0 guarded-secret", "status 0 guarded-secret", "status -25293"] and requests == 1,
      "an LAContext with a reuse duration: asked once for two reads; invalidated: errSecAuthFailed", (lines, requests))
status, lines, requests = probe_run("context-evaluated", grant)
check(lines == ["can true", "evaluated true 0", "status 0 guarded-secret"] and requests == 1,
      "LAContext.evaluatePolicy, then SecItem with the context: asked once", (lines, requests))
status, lines, requests = probe_run("biometry", grant)
check(len(lines) == 2 and lines[0] in ("can false -6", "can false -7") and lines[1] == "status -25291",
      "biometry without a finger enrolled in fprintd: canEvaluatePolicy false, SecItemAdd errSecNotAvailable", lines)
status, lines, requests = probe_run("delete", grant)
check(lines == ["status 0"] and requests == 1, "SecItemDelete of the guarded item asks first", (lines, requests))

# Why keychain-ssh-agent asks pinentry, not polkit, before an `ssh-add -c` key signs: an action's
# message names things only through details ($(name) in the message, as pkexec's), and polkitd
# takes details from root or the action's owner only, never from the user's own process. Should
# a polkit ever take them, this fails, and the agent may name program, key and host there too.
status, out, err = run(["bash", "-c", 'exec /usr/bin/pkcheck --action-id org.keychain-linux.user-presence --process "$$" '
                        "--detail program /usr/bin/ssh"])
check(status != 0 and "Only trusted callers" in err and "pass details" in err,
      "polkit refuses details from the user's own process (so ssh-add -c asks pinentry)", f"{status} {out} {err}")

sys.exit(1 if failures else 0)
