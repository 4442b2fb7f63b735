#!/usr/bin/env python3
"""Boots the guest Tests/vm/run.sh prepared and drives it on its two serial lines: ttyS0, where
getty and /etc/pam.d/login let the user in as a person would, and ttyS1, a root shell (a service,
not a login) from which the driver looks at the user's keychain, sessions and units. Writes one
line per case to WORK/results: `ok|FAIL<TAB>name<TAB>detail`. Every wait has a timeout; qemu is
killed at the end whatever happened."""

import argparse
import os
import re
import signal
import socket
import sys
import time

import pexpect
import pexpect.fdpexpect

BOOT_SECONDS = 600  # an emulated boot of a loaded machine
COMMAND_SECONDS = 120  # a keychain's key derivation, emulated, on a login or a password change

parser = argparse.ArgumentParser()
parser.add_argument("--work", required=True)
parser.add_argument("--user", required=True)
parser.add_argument("--password", required=True)
args = parser.parse_args()
work, user = args.work, args.user
new_password = args.password + "-changed"
results = open(os.path.join(work, "results"), "w")
log = sys.stdout


class Failure(Exception):
    pass


class Shell:
    """A shell on a serial line, each command's end and status found by a marker that only the
    shell's expansion makes (the line's echo shows `$?`, never the number)."""

    def __init__(self, channel, name):
        self.channel, self.name, self.count = channel, name, 0

    def run(self, command, timeout=COMMAND_SECONDS):
        self.count += 1
        marker = f"@@{self.name}{self.count}@@"
        self.channel.sendline(f"{command}; echo {marker}$?@@")
        self.channel.expect(re.escape(marker) + r"(\d+)@@", timeout=timeout)
        output = self.channel.before.replace("\r", "")
        status = int(self.channel.match.group(1))
        log.write(f"\n[{self.name}] $ {command}\n[{self.name}] status {status}\n")
        return status, output.strip()

    def ok(self, command, timeout=COMMAND_SECONDS):
        status, output = self.run(command, timeout)
        if status != 0:
            raise Failure(f"`{command}` exited {status}: {output[-400:]}")
        return output

    def wait_ready(self, timeout):
        """Asks until the shell answers (a shell that is still starting drops what it is sent)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.channel.sendline("echo @@$((6*7))@@")
            try:
                self.channel.expect("@@42@@", timeout=5)
                # No pager, no colours, no bracketed paste: plain lines for the driver.
                self.channel.sendline("stty -echo; export PS1= PS2= SYSTEMD_PAGER= SYSTEMD_COLORS=0 PAGER=cat; bind 'set enable-bracketed-paste off'")
                time.sleep(1)
                self.ok("true", timeout=30)
                return
            except pexpect.TIMEOUT:
                continue
        raise Failure(f"no shell on {self.name} after {timeout} s")


def record(outcome, name, detail=""):
    results.write(f"{outcome}\t{name}\t{' '.join(detail.split())}\n")
    results.flush()
    log.write(f"\n=== {outcome} {name} {detail}\n")


def case(name, function):
    try:
        function()
        record("ok", name)
        return True
    except (Failure, pexpect.TIMEOUT, pexpect.EOF, OSError) as error:
        detail = str(error)[:600] if isinstance(error, Failure) else f"{type(error).__name__} waiting on the guest"
        record("FAIL", name, detail)
        return False


def expect_equal(expected, actual, what):
    if expected != actual:
        raise Failure(f"{what}: expected [{expected}], got [{actual}]")


# One emulated CPU: with two, a boot on a loaded host stalled in soft lockups (each vCPU waiting on
# the other, starved).
qemu = [
    "qemu-system-x86_64", "-accel", "tcg", "-m", "1536", "-smp", "1", "-display", "none", "-nodefaults", "-no-user-config",
    "-chardev", "stdio,id=s0,signal=off", "-serial", "chardev:s0",
    "-chardev", f"socket,id=s1,path={work}/control.sock,server=on,wait=off", "-serial", "chardev:s1",
    "-drive", f"file={work}/disk.img,format=raw,if=virtio", "-nic", "none",
    "-kernel", f"{work}/vmlinuz", "-initrd", f"{work}/initrd.img",
    "-append", "root=/dev/vda rw console=ttyS0 quiet loglevel=3 systemd.show_status=false",
    "-pidfile", f"{work}/qemu.pid",
    # The guest's reboot ends qemu, and the driver starts it again on the same disk: a machine
    # restarted with its memory gone (qemu's own reset with -kernel hung here under TCG).
    "-no-reboot",
]  # fmt: skip
started = time.monotonic()
uid = None


def power_on():
    """Starts qemu and connects to both serial lines (the second is a socket qemu listens on)."""
    global console, root, session
    if os.path.exists(f"{work}/control.sock"):
        os.unlink(f"{work}/control.sock")
    console = pexpect.spawn(qemu[0], qemu[1:], encoding="utf-8", codec_errors="replace", timeout=COMMAND_SECONDS, logfile=log)
    for _ in range(100):
        if os.path.exists(f"{work}/control.sock"):
            break
        time.sleep(0.1)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(f"{work}/control.sock")
    control = pexpect.fdpexpect.fdspawn(sock, encoding="utf-8", codec_errors="replace", timeout=COMMAND_SECONDS, logfile=log)
    control.sock = sock
    root = Shell(control, "root")
    session = Shell(console, "user")


power_on()


def as_user(command):
    return f"setpriv --reuid={user} --regid={user} --init-groups env -i HOME=/home/{user} PATH=/usr/bin:/bin {command}"


def state(klass):
    """The user's lock state of a class, as `security status` says it from outside any session."""
    output = root.ok(as_user("security status"))
    for line in output.splitlines():
        if line.startswith(klass + ":"):
            return line.split()[1]
    raise Failure(f"`security status` has no {klass}: {output[-300:]}")


def boot():
    console.expect(r"login: ", timeout=BOOT_SECONDS)
    root.wait_ready(BOOT_SECONDS)
    log.write(f"\n--- booted after {time.monotonic() - started:.0f} s\n")


def login(password):
    console.sendline("")
    console.expect(r"login: ", timeout=60)
    console.sendline(user)
    console.expect("Password: ", timeout=60)
    console.sendline(password)
    # The shell's prompt (Debian's PS1 ends in `$ `), after the module's key derivation.
    if console.expect([r"\$ ", "Login incorrect"], timeout=COMMAND_SECONDS) == 1:
        raise Failure(f"login refused {user} with its password")
    session.wait_ready(COMMAND_SECONDS)


def sessions():
    return root.ok(f"loginctl list-sessions --no-legend | awk '$3 == \"{user}\"'")


def logout_ends_session():
    """Leaves the shell; the login session must close and the user manager stop (logind keeps a
    session while any process stays in its scope)."""
    console.sendline("exit")
    console.expect(r"login: ", timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        left = sessions()
        active = root.run(f"systemctl is-active user@{uid}.service")[1].splitlines()[-1:]
        if not left and active != ["active"]:
            return
        time.sleep(3)
    processes = root.run(f"ps -u {user} -o pid=,comm=,cgroup= ; loginctl list-sessions --no-legend")[1]
    raise Failure(f"60 s after logout: sessions [{left}], user@{uid}.service {active}; the user's processes: {processes}")


def installs_on_the_booted_guest():
    """`apt install ./FILE`, as a user installs a downloaded package: the guest has no network, so
    this also proves that every Depends is a package of the release (its image has them)."""
    root.ok("test ! -e /usr/bin/security")
    root.ok("cd /root && DEBIAN_FRONTEND=noninteractive apt install -y --no-install-recommends ./keychain-for-linux.deb", timeout=600)
    expect_equal("install ok installed", root.ok("dpkg-query -W -f='${Status}' keychain-for-linux").splitlines()[-1], "dpkg's status")
    for file in ("common-auth", "common-session", "common-password"):
        root.ok(f"grep -q '^[^#].*pam_keychain\\.so' /etc/pam.d/{file}")
    root.ok("apt-get check")


def broker_listens():
    """The package enabled keychain-broker.socket: it listens from the install on (and at every
    boot); the service starts when a client connects."""
    expect_equal("active", root.run("systemctl is-active keychain-broker.socket")[1].splitlines()[-1], "keychain-broker.socket")
    expect_equal("enabled", root.run("systemctl is-enabled keychain-broker.socket")[1].splitlines()[-1], "keychain-broker.socket's enablement")
    root.ok("test -S /run/keychain-broker/socket")


def kernel_class_keys():
    """The `keychain:*` keys of the user's persistent keyring (where class keys lived before the
    broker): none when the broker keeps the keychain."""
    return root.run(
        f"setpriv --reuid={user} --regid={user} --init-groups keyctl session - sh -c 'keyctl show $(keyctl get_persistent @s)'"
        " | grep -Ec 'keychain:[0-9a-f]+:[AC]$' || true"
    )[1].splitlines()[-1]


def first_login():
    global uid
    uid = root.ok(f"id -u {user}").splitlines()[-1]
    root.ok(f"test ! -e /home/{user}/.local/share/keychains/login.keychain-db")
    login(args.password)
    session.ok("test -f ~/.local/share/keychains/login.keychain-db")
    expect_equal("unlocked", state("WhenUnlocked"), "WhenUnlocked after the first login")
    expect_equal("unlocked", state("AfterFirstUnlock"), "AfterFirstUnlock after the first login")
    expect_equal("0", kernel_class_keys(), "class keys in the user's kernel keyring")
    expect_equal("active", root.run("systemctl is-active keychain-broker.service")[1].splitlines()[-1], "keychain-broker.service after the login")
    info = session.ok("security status 2>&1")
    if "keychain-broker" not in info:
        raise Failure(f"`security status` does not name the broker: {info[-300:]}")
    session.ok("security add-generic-password -a wu -s vm -w wu-secret")
    session.ok("security add-generic-password -a afu -s vm --accessibility afterFirstUnlock -w afu-secret")


def git_helper():
    session.ok("export GIT_CONFIG_NOSYSTEM=1; git config --global credential.helper keychain")
    session.ok("printf 'protocol=https\\nhost=vm.example.org\\nusername=bob\\npassword=git-vm-secret\\n\\n' | git credential approve")
    out = session.ok("printf 'protocol=https\\nhost=vm.example.org\\n\\n' | GIT_TERMINAL_PROMPT=0 git credential fill")
    expect_equal(["password=git-vm-secret"], [line for line in out.splitlines() if line.startswith("password=")], "git credential fill")
    # The helper's item trusts the helper under git, not `security`: on the session's terminal the
    # broker's question is asked, and allowed once with the keychain's password.
    session.count += 1
    marker = f"@@ask{session.count}@@"
    console.sendline(f"security find-internet-password -s vm.example.org -w; echo {marker}$?@@")
    console.expect(r"\[d\]eny, allow \[o\]nce, \[a\]lways allow\? ", timeout=COMMAND_SECONDS)
    console.sendline("o")
    console.expect("Keychain password: ", timeout=60)
    console.sendline(args.password)
    console.expect(re.escape(marker) + r"(\d+)@@", timeout=COMMAND_SECONDS)
    output = console.before.replace("\r", "")
    expect_equal("0", console.match.group(1), f"security's read, allowed once ({output[-200:]})")
    expect_equal("git-vm-secret", output.strip().splitlines()[-1], "the item, allowed once")


def untrusted_program_not_asked():
    """A program the item does not trust (a copy of `security` in the user's home: unidentified)
    reading an item `security` made, in the console session but with no terminal and nobody named
    to answer: refused at once with errSecInteractionNotAllowed (exit 36), not asked, not hung."""
    session.ok("cp /usr/bin/security ~/my-security")
    status, output = session.run("setsid -w env -u KEYCHAIN_ACCESS_ANSWERER ~/my-security find-generic-password -a wu -w </dev/null 2>&1")
    expect_equal(36, status, f"the copy's read ({output[-200:]})")
    expect_equal("wu-secret", session.ok("security find-generic-password -a wu -w").splitlines()[-1], "the installed security's read")


def logout_locks():
    logout_ends_session()
    expect_equal("locked", state("WhenUnlocked"), "WhenUnlocked after the logout")
    expect_equal("unlocked", state("AfterFirstUnlock"), "AfterFirstUnlock after the logout")
    expect_equal("afu-secret", root.ok(as_user("security find-generic-password -a afu -w")).splitlines()[-1], "the AfterFirstUnlock item")
    expect_equal(36, root.run(as_user("security find-generic-password -a wu -w"))[0], "the WhenUnlocked item's status")


def postinst_applies_sysctl():
    root.ok("echo 259200 > /proc/sys/kernel/keys/persistent_keyring_expiry")
    root.ok("DEBIAN_FRONTEND=noninteractive /var/lib/dpkg/info/keychain-for-linux.postinst configure")
    expect_equal("31536000", root.ok("cat /proc/sys/kernel/keys/persistent_keyring_expiry").splitlines()[-1], "after postinst on the running guest")


def reboot_locks_both():
    root.channel.sendline("systemctl reboot")
    console.expect(pexpect.EOF, timeout=BOOT_SECONDS)
    console.close()
    root.channel.sock.close()
    power_on()
    boot()
    broker_listens()
    expect_equal("locked", state("WhenUnlocked"), "WhenUnlocked after the reboot")
    expect_equal("locked", state("AfterFirstUnlock"), "AfterFirstUnlock after the reboot")
    expect_equal("31536000", root.ok("cat /proc/sys/kernel/keys/persistent_keyring_expiry").splitlines()[-1], "the package's sysctl at boot")
    login(args.password)
    expect_equal("unlocked", state("WhenUnlocked"), "WhenUnlocked after the login")
    expect_equal("unlocked", state("AfterFirstUnlock"), "AfterFirstUnlock after the login")
    expect_equal("0", kernel_class_keys(), "class keys in the user's kernel keyring after the login")
    expect_equal("wu-secret", session.ok("security find-generic-password -a wu -w").splitlines()[-1], "the WhenUnlocked item")


def passwd_rekeys():
    session.channel.sendline("passwd")
    session.channel.expect(r"[Cc]urrent password: ", timeout=60)
    session.channel.sendline(args.password)
    session.channel.expect(r"New password: ", timeout=COMMAND_SECONDS)
    session.channel.sendline(new_password)
    session.channel.expect(r"Retype new password: ", timeout=60)
    session.channel.sendline(new_password)
    session.channel.expect(r"password updated successfully", timeout=COMMAND_SECONDS)
    session.ok("true")
    session.ok("security lock-keychain")
    expect_equal(51, session.run(f"printf '%s\\n' '{args.password}' | security unlock-keychain")[0], "the old password's unlock")
    logout_ends_session()
    login(new_password)
    expect_equal("unlocked", state("WhenUnlocked"), "WhenUnlocked after a login with the new password")
    expect_equal("0", kernel_class_keys(), "class keys in the user's kernel keyring after the new password's login")
    expect_equal("wu-secret", session.ok("security find-generic-password -a wu -w").splitlines()[-1], "the WhenUnlocked item")


def enable_takes_over():
    # A provider to take over from: the user's gnome-keyring (pam_gnome_keyring's daemon, or its
    # socket's), serving the name and its pkcs11 component, which enable starts again.
    session.ok("gnome-keyring-daemon --start --components=pkcs11,secrets >/dev/null")
    session.ok("busctl --user call org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.DBus.Peer Ping")
    out = session.ok("keychain-secret-service enable --no-import")
    if "org.freedesktop.secrets is now provided by keychain-secret" not in out:
        raise Failure(f"enable: {out[-400:]}")
    expect_equal("masked", session.run("systemctl --user is-enabled gnome-keyring-daemon.service")[1].splitlines()[-1], "gnome-keyring's unit")
    expect_equal("enabled", session.run("systemctl --user is-enabled keychain-secret-service.service")[1].splitlines()[-1], "our unit")
    # What enable started again (gnome-keyring's pkcs11) runs in a unit of the user manager, not
    # in the login session's scope.
    stray = root.ok(f"for p in $(pgrep -u {user}); do grep -q '/session-[^/]*\\.scope$' /proc/$p/cgroup && "
                    f"echo \"$p $(cat /proc/$p/comm)\"; done; true")  # fmt: skip
    stray = [line for line in stray.splitlines() if line.split()[-1:] not in (["bash"], ["login"], ["(sd-pam)"])]
    if stray:
        raise Failure(f"left in the login session's scope: {stray}")
    if "gnome-keyring-daemon started again for pkcs11" not in out:
        raise Failure(f"enable did not start gnome-keyring's pkcs11 again: {out[-400:]}")
    cgroups = root.ok(f"for p in $(pgrep -u {user} -x gnome-keyring-d); do cat /proc/$p/cgroup; done")
    if f"/user@{uid}.service/" not in cgroups:
        raise Failure(f"gnome-keyring's pkcs11 is not under user@{uid}.service: {cgroups}")


def next_login_activates():
    login(new_password)
    session.ok("busctl --user call org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.DBus.Peer Ping")
    out = session.ok("busctl --user status org.freedesktop.secrets")
    comm = [line for line in out.splitlines() if line.startswith("Comm=")]
    expect_equal(["Comm=keychain-secret"], comm, "the owner of org.freedesktop.secrets at the next login")


def disable_gives_back():
    out = session.ok("keychain-secret-service disable")
    if "removed" not in out:
        raise Failure(f"disable: {out[-400:]}")
    masked = session.run("systemctl --user is-enabled gnome-keyring-daemon.service")[1].splitlines()[-1:]
    if masked == ["masked"]:
        raise Failure("gnome-keyring's unit is still masked")
    expect_equal("disabled", session.run("systemctl --user is-enabled keychain-secret-service.service")[1].splitlines()[-1], "our unit")


# In order, each on what the ones before left; a fatal one's failure leaves the rest not reached.
cases = [
    ("the guest boots to getty and the driver's shell", boot, True),
    ("apt install ./FILE on the booted guest: installed from the file alone, the PAM profile in the login stack, apt consistent", installs_on_the_booted_guest, True),
    ("keychain-broker.socket is enabled and listens after the install", broker_listens, True),
    ("the first login (getty, /etc/pam.d/login) creates the login keychain and unlocks it into the broker (no class key in the user's keyring)", first_login, True),
    ("a program the item does not trust, in the console session without a terminal: errSecInteractionNotAllowed (36)", untrusted_program_not_asked, False),
    ("the git helper in the session; security asked on the terminal for the helper's item, allowed once", git_helper, False),
    ("a logout ends the session, locks WhenUnlocked and keeps AfterFirstUnlock", logout_locks, True),
    ("after a reboot the broker listens, both classes stay locked until the login (into the broker); the sysctl applied at boot", reboot_locks_both, True),
    ("postinst on the running guest applies the sysctl", postinst_applies_sysctl, False),
    ("passwd re-keys the keychain through the broker: the old password no longer opens it, the new one unlocks at login", passwd_rekeys, True),
    ("keychain-secret-service enable with systemd --user: units masked and enabled, nothing left in the session scope", enable_takes_over, False),
    ("after enable, a logout ends the session and user@UID.service stops", logout_ends_session, False),
    ("at the next login, D-Bus activation starts keychain-secret-service", next_login_activates, True),
    ("keychain-secret-service disable: the units back as they were", disable_gives_back, False),
    ("after disable, a logout ends the session and user@UID.service stops", logout_ends_session, False),
]
try:
    for index, (name, function, fatal) in enumerate(cases):
        if not case(name, function) and fatal:
            for later, _, _ in cases[index + 1 :]:
                record("FAIL", later, "not reached")
            break
finally:
    log.write(f"\n--- {time.monotonic() - started:.0f} s in the guest\n")
    try:
        root.run("journalctl -b --no-pager -p warning | tail -40", timeout=30)
    except Exception:
        pass
    console.kill(signal.SIGKILL)
    console.close(force=True)
    root.channel.sock.close()
    results.close()
