# A polkit authentication agent of the tests' own, registered for one process (the subject),
# run as the test user with Debian's python3-dbus. Modes: "password:PW" answers through polkit's
# setuid helper (the real PAM check), "cancel" dismisses, "hang" never answers. Each request it gets
# appends a line to COUNT_FILE; it prints "registered" once polkit has it.
import os
import subprocess
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

AGENT_PATH = "/org/keychain_linux/tests/agent"
HELPER = "/usr/lib/polkit-1/polkit-agent-helper-1"


def start_time(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


class Agent(dbus.service.Object):
    def __init__(self, bus, mode, count_file):
        super().__init__(bus, AGENT_PATH)
        self.mode, self.count_file = mode, count_file

    @dbus.service.method("org.freedesktop.PolicyKit1.AuthenticationAgent", in_signature="sssa{ss}sa(sa{sv})",
                         out_signature="", async_callbacks=("reply", "error"))
    def BeginAuthentication(self, action_id, message, icon, details, cookie, identities, reply, error):
        with open(self.count_file, "a") as f:
            f.write(f"{action_id}\n")
        if self.mode == "cancel":
            error(dbus.DBusException("dismissed by the test", name="org.freedesktop.PolicyKit1.Error.Cancelled"))
        elif self.mode.startswith("password:"):
            self.answer(cookie, self.mode.split(":", 1)[1])
            reply()
        # "hang": neither, until polkit gives up on us or the test ends.

    @dbus.service.method("org.freedesktop.PolicyKit1.AuthenticationAgent", in_signature="s", out_signature="")
    def CancelAuthentication(self, cookie):
        pass

    def answer(self, cookie, password):
        user = os.environ.get("USER") or os.getlogin()
        helper = subprocess.Popen([HELPER, user], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        helper.stdin.write(cookie + "\n")
        helper.stdin.flush()
        for line in helper.stdout:
            if line.startswith("PAM_PROMPT_ECHO"):
                helper.stdin.write(password + "\n")
                helper.stdin.flush()
            elif line.startswith(("SUCCESS", "FAILURE")):
                break
        helper.stdin.close()
        helper.wait(timeout=30)


def main():
    subject_pid, mode, count_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    Agent(bus, mode, count_file)
    authority = dbus.Interface(bus.get_object("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority"),
                               "org.freedesktop.PolicyKit1.Authority")
    subject = ("unix-process", {"pid": dbus.UInt32(subject_pid), "start-time": dbus.UInt64(start_time(subject_pid))})
    authority.RegisterAuthenticationAgent(subject, "C", AGENT_PATH)
    print("registered", flush=True)
    GLib.timeout_add_seconds(120, GLib.MainLoop.quit, loop)
    loop.run()


loop = GLib.MainLoop()
if __name__ == "__main__":
    main()
