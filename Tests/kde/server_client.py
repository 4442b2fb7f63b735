"""KWallet's D-Bus API driven as KDE's programs drive it (dbus-python, as python-keyring does):
the cases of cases-server.sh that kwallet-query cannot express. `server_client.py CASE ARGS...`;
a failed check exits non-zero with what was expected. The same cases run against kwalletd5 itself
(KWALLET_TARGET=kwalletd5), so each states KWallet's own behaviour."""
import os
import struct
import subprocess
import sys
import time

import dbus

BUS = os.environ.get("KWALLET_BUS", "org.kde.kwalletd5")
# The keychain's service, or kwalletd5 itself, where some rules are laxer (said where they differ).
OURS = os.environ.get("KWALLET_TARGET", "keychain") == "keychain"
PATH = "/modules/" + BUS.rsplit(".", 1)[-1]


def wallet(bus=None):
    bus = bus or dbus.SessionBus()
    return dbus.Interface(bus.get_object(BUS, PATH), "org.kde.KWallet")


def expect(expected, actual, what=""):
    if expected != actual:
        line = sys._getframe(1).f_lineno
        sys.exit("line %d: expected %s: %r\ngot: %r" % (line, what, expected, actual))


def qstring(text):
    """A QString as Qt 5's QDataStream writes it."""
    data = text.encode("utf-16-be")
    return struct.pack(">I", len(data)) + data


def qmap(pairs):
    """A QMap<QString,QString> as KWallet's library writes one: the count, then the pairs from the
    first key (UTF-16 order) to the last."""
    out = struct.pack(">I", len(pairs))
    for key in sorted(pairs, key=lambda k: k.encode("utf-16-be")):
        out += qstring(key) + qstring(pairs[key])
    return out


def seed(name="kdewallet", folder="Passwords", key="mail", password="first"):
    """A password entry kwallet-query can then read and change (it writes only existing ones)."""
    w = wallet()
    h = w.open(name, 0, "seed")
    expect(True, h > 0, "a handle")
    expect(0, w.writePassword(h, folder, key, password, "seed"), "writePassword")


def seed_map(folder, key, *pairs):
    w = wallet()
    h = w.open("kdewallet", 0, "seed")
    value = qmap(dict(p.split("=", 1) for p in pairs))
    expect(0, w.writeMap(h, folder, key, dbus.ByteArray(value), "seed"), "writeMap")


def read_map_bytes(folder, key, *pairs):
    """The map's bytes are exactly what Qt's QDataStream writes for these pairs."""
    w = wallet()
    h = w.open("kdewallet", 0, "check")
    expect(3, w.entryType(h, folder, key, "check"), "a map entry")
    expect(qmap(dict(p.split("=", 1) for p in pairs)), bytes(w.readMap(h, folder, key, "check")), "the map's bytes")


def entries():
    """Binary entries, maps, passwords, folders, rename and remove, with kwalletd's return codes."""
    w = wallet()
    app = "entries"
    h = w.open("kdewallet", 0, app)
    blob = bytes([0, 1, 2, 0xFF, 0, 0x80])
    # dbus-python takes the last overload it introspected: the typed one is named.
    expect(0, w.writeEntry(h, "Bin", "blob", dbus.ByteArray(blob), 2, app, signature="issayis"), "writeEntry with a type")
    expect(blob, bytes(w.readEntry(h, "Bin", "blob", app)), "binary read back")
    expect(2, w.entryType(h, "Bin", "blob", app), "stream type")
    # The overload without a type writes a binary entry.
    expect(0, w.writeEntry(h, "Bin", "plain", dbus.ByteArray(b"\x00raw"), app, signature="issays"), "writeEntry(issays)")
    expect(2, w.entryType(h, "Bin", "plain", app), "the overload's type")
    expect(b"\x00raw", bytes(w.readEntry(h, "Bin", "plain", app)))
    expect(0, w.writePassword(h, "Bin", "pw", "pässwörd😀", app))
    expect(1, w.entryType(h, "Bin", "pw", app))
    expect("pässwörd😀", str(w.readPassword(h, "Bin", "pw", app)))
    expect(qstring("pässwörd😀"), bytes(w.readEntry(h, "Bin", "pw", app)), "a password's bytes are its QString")
    expect("", str(w.readPassword(h, "Bin", "blob", app)), "readPassword of a binary entry")
    expect(0, w.writePassword(h, "Bin", "none", "", app))
    expect(b"\x00\x00\x00\x00", bytes(w.readEntry(h, "Bin", "none", app)), "an empty password is an empty QString, not a null one")
    expect(True, bool(w.removeEntry(h, "Bin", "none", app) == 0))
    expect(b"", bytes(w.readMap(h, "Bin", "pw", app)), "readMap of a password")
    expect(0, w.writeEntry(h, "Bin", "empty", dbus.ByteArray(b""), 2, app, signature="issayis"))
    expect(b"", bytes(w.readEntry(h, "Bin", "empty", app)))
    expect(True, bool(w.hasEntry(h, "Bin", "empty", app)))
    expect(["blob", "empty", "plain", "pw"], [str(k) for k in w.entryList(h, "Bin", app)])
    # Folders.
    expect(True, bool(w.createFolder(h, "New", app)), "createFolder")
    expect(False, bool(w.createFolder(h, "New", app)), "createFolder again")
    expect(True, bool(w.hasFolder(h, "New", app)))
    expect(False, bool(w.hasFolder(h, "Nope", app)))
    expect([], [str(k) for k in w.entryList(h, "New", app)], "an empty folder")
    folders = [str(f) for f in w.folderList(h, app)]
    expect(True, "New" in folders and "Bin" in folders, "folderList %r" % folders)
    # Rename: never over another entry.
    expect(0, w.renameEntry(h, "Bin", "plain", "renamed", app))
    expect(-1, w.renameEntry(h, "Bin", "renamed", "pw", app), "rename onto an existing entry")
    expect(-1, w.renameEntry(h, "Bin", "gone", "x", app), "rename of no entry")
    expect(b"\x00raw", bytes(w.readEntry(h, "Bin", "renamed", app)))
    expect(False, bool(w.hasEntry(h, "Bin", "plain", app)))
    # Lists and patterns.
    # Not the renamed entry: kwalletd 5.103 lists it under its old name (its backend's renameEntry
    # never gives the entry its new key), which the keychain does not copy.
    expect({"blob": blob}, {str(k): bytes(v) for k, v in w.readEntryList(h, "Bin", "b*", app).items()})
    expect({"pw": "pässwörd😀"}, {str(k): str(v) for k, v in w.passwordList(h, "Bin", app).items()})
    expect({"pw": "pässwörd😀"}, {str(k): str(v) for k, v in w.readPasswordList(h, "Bin", "p?", app).items()})
    expect({}, dict(w.readPasswordList(h, "Bin", "p", app)), "a pattern matches the whole key")
    expect(4, len(w.entriesList(h, "Bin", app)))
    expect(0, w.writeMap(h, "Bin", "m", dbus.ByteArray(qmap({"a": "1"})), app))
    expect({"m": qmap({"a": "1"})}, {str(k): bytes(v) for k, v in w.mapList(h, "Bin", app).items()})
    expect({"m": qmap({"a": "1"})}, {str(k): bytes(v) for k, v in w.readMapList(h, "Bin", "[lm]", app).items()})
    # Remove: 0, -3 for a key the folder lacks, 0 for a folder that does not exist.
    expect(0, w.removeEntry(h, "Bin", "renamed", app))
    expect(-3, w.removeEntry(h, "Bin", "renamed", app), "removeEntry of no entry")
    expect(0, w.removeEntry(h, "Nope", "x", app), "removeEntry in no folder")
    if OURS:
        # kwalletd 5.103 answers these from hashes it makes for a folder only through createFolder
        # or a reload: for "Bin", made by a write, it says "does not exist" until then.
        expect(False, bool(w.keyDoesNotExist("kdewallet", "Bin", "pw")))
        expect(False, bool(w.folderDoesNotExist("kdewallet", "Bin")))
    expect(True, bool(w.keyDoesNotExist("kdewallet", "Bin", "renamed")))
    expect(True, bool(w.folderDoesNotExist("kdewallet", "Nope")))
    expect(True, bool(w.folderDoesNotExist("nowallet", "Bin")))
    expect(True, bool(w.removeFolder(h, "Bin", app)))
    expect(False, bool(w.removeFolder(h, "Bin", app)))
    expect(False, bool(w.hasEntry(h, "Bin", "pw", app)))
    expect(0, w.entryType(h, "Bin", "pw", app))


def handles():
    """A handle holds for the connection and application id that opened it, no other."""
    a_bus = dbus.SessionBus(private=True)
    b_bus = dbus.SessionBus(private=True)
    a, b = wallet(a_bus), wallet(b_bus)
    h = a.open("kdewallet", 0, "app-a")
    expect(0, a.writePassword(h, "Passwords", "k", "secret", "app-a"))
    expect(True, bool(b.isOpen(dbus.Int32(h), signature="i")), "isOpen(handle) for anyone")
    expect(True, bool(b.isOpen("kdewallet", signature="s")), "isOpen(wallet)")
    for appid in ("app-a", "app-b"):
        if appid == "app-a" and not OURS:
            # kwalletd 5.103 keeps open()'s hold for the appid on any connection (a sessionless
            # session): a program that names another's appid uses its handle.
            expect("secret", str(b.readPassword(h, "Passwords", "k", appid)))
            continue
        expect("", str(b.readPassword(h, "Passwords", "k", appid)), "another connection's handle (%s)" % appid)
        expect(-1, b.writePassword(h, "Passwords", "k", "stolen", appid))
        expect([], list(b.folderList(h, appid)))
    expect("", str(a.readPassword(h, "Passwords", "k", "app-b")), "the same connection under another appid")
    h2 = b.open("kdewallet", 0, "app-b")
    expect(h, h2, "one handle per open wallet")
    expect("secret", str(b.readPassword(h2, "Passwords", "k", "app-b")))
    expect(["app-a", "app-b"], sorted(str(u) for u in a.users("kdewallet")))
    # The connection's hold goes with it; the wallet stays open.
    b_bus.close()
    deadline = time.time() + 5
    while OURS and time.time() < deadline and "app-b" in [str(u) for u in a.users("kdewallet")]:
        time.sleep(0.05)
    # kwalletd keeps open()'s sessionless holds when their connection goes.
    expect(["app-a"] if OURS else ["app-a", "app-b"], sorted(str(u) for u in a.users("kdewallet")), "users once app-b left the bus")
    expect(1, a.close(dbus.Int32(h), False, "app-a", signature="ibs"), "close without force leaves it open")
    expect("", str(a.readPassword(h, "Passwords", "k", "app-a")), "a closed hold")
    expect(True, bool(a.isOpen("kdewallet", signature="s")))
    expect(0, a.close("kdewallet", True, signature="sb"), "a forced close")
    expect(False, bool(a.isOpen("kdewallet", signature="s")))
    expect(-1, a.close("kdewallet", True, signature="sb"), "close of no open wallet")
    expect(-1, a.close(dbus.Int32(h), True, "app-a", signature="ibs"))


def introspect():
    """dbus-python learns the signatures from Introspect: kwalletd's, overloads included."""
    import xml.etree.ElementTree as ET
    xml = dbus.Interface(dbus.SessionBus().get_object(BUS, PATH), "org.freedesktop.DBus.Introspectable").Introspect()
    interface = [i for i in ET.fromstring(xml.split("\n", 2)[2]).findall("interface") if i.get("name") == "org.kde.KWallet"][0]

    def signatures(kind, name):
        return sorted(
            "".join(a.get("type") for a in m.findall("arg") if a.get("direction", "in") == ("out" if kind == "signal" else "in"))
            for m in interface.findall(kind) if m.get("name") == name)

    expect(["sxs"], signatures("method", "open"), "open's arguments")
    expect(["issayis", "issays"], signatures("method", "writeEntry"), "both writeEntry")
    expect(["ibs", "sb"], signatures("method", "close"), "both close")
    expect(["sayi"], signatures("method", "pamOpen"))
    expect(["i", "s"], signatures("signal", "walletClosed"), "both walletClosed")
    expect(["ii"], signatures("signal", "walletAsyncOpened"))
    expect(44, len(interface.findall("method")), "kwalletd's methods")
    # A signature kwalletd has no method for is refused; the service goes on.
    msg = dbus.lowlevel.MethodCallMessage(BUS, PATH, "org.kde.KWallet", "open")
    msg.append("kdewallet", "x", signature="ss")
    try:
        dbus.SessionBus().send_message_with_reply_and_block(msg)
        sys.exit("open(ss) was answered")
    except dbus.DBusException as e:
        expect("org.freedesktop.DBus.Error.UnknownMethod", e.get_dbus_name())
    expect(True, bool(wallet().isEnabled()))


def open_wallet(name, appid="opener"):
    """Prints the handle open answers (-1 for none)."""
    print(int(wallet().open(name, 0, appid)))


def open_async(name):
    """openAsync answers a transaction id at once; walletAsyncOpened brings the handle."""
    open_many(1, name)


def closed_on_lock():
    """A keychain locked behind the service's back closes its wallet, announced as kwalletd does."""
    from dbus.mainloop.glib import DBusGMainLoop
    from gi.repository import GLib
    bus = dbus.SessionBus(mainloop=DBusGMainLoop())
    w = wallet(bus)
    h = int(w.open("kdewallet", 0, "locker"))
    closed = []
    loop = GLib.MainLoop()

    def on_closed(handle):
        closed.append(int(handle))
        loop.quit()

    bus.add_signal_receiver(on_closed, "walletClosedId", "org.kde.KWallet", None, PATH)
    subprocess.run(["security", "lock-keychain"], check=True)
    GLib.timeout_add_seconds(10, loop.quit)
    loop.run()
    expect([h], closed, "walletClosedId")
    expect(False, bool(w.isOpen(dbus.Int32(h), signature="i")))


def wait_owned(name, pid):
    """Until the process `pid` owns `name` (so no activation starts another in its place)."""
    bus = dbus.SessionBus()
    deadline = time.time() + 10
    while time.time() < deadline:
        if bus.name_has_owner(name) and int(bus.call_blocking(
                "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                "GetConnectionUnixProcessID", "s", (name,))) == int(pid):
            return
        time.sleep(0.05)
    sys.exit("%s never owned by %s" % (name, pid))


def heard_folders(out, seconds="4", appid=""):
    """What org.kde.KWallet's signals tell this client (holding the wallet under APPID if given),
    "member arguments..." a line in OUT; OUT.ready once it listens. It listens SECONDS at most,
    or until OUT.stop appears: then one round trip to the service, after which every signal the
    service sent before it has come (one sender, one order)."""
    import os
    from dbus.mainloop.glib import DBusGMainLoop
    from gi.repository import GLib
    bus = dbus.SessionBus(mainloop=DBusGMainLoop())
    heard = []
    bus.add_signal_receiver(lambda *args, **kw: heard.append(" ".join([kw["member"]] + [str(a) for a in args])),
                            None, "org.kde.KWallet", None, PATH, member_keyword="member")
    if appid:
        expect(True, int(wallet(bus).open("kdewallet", 0, appid)) > 0, "a handle")
    wallet(bus).isEnabled()  # a round trip: the match is in place
    open(out + ".ready", "w").close()
    loop = GLib.MainLoop()

    def stopped():
        if not os.path.exists(out + ".stop"):
            return True
        wallet(bus).isEnabled()
        GLib.idle_add(loop.quit)
        return False
    GLib.timeout_add(int(float(seconds) * 1000), loop.quit)
    GLib.timeout_add(100, stopped)
    loop.run()
    with open(out, "w") as f:
        f.write("".join(line + "\n" for line in heard))


def does_not_exist(asks, wallet_name="kdewallet"):
    """folderDoesNotExist and keyDoesNotExist of WALLET_NAME, for each line of ASKS ("folder F"
    or "key F K", shell words): their answers, one line, "true" or "false"."""
    import shlex
    w = wallet()
    answers = []
    for line in asks.splitlines():
        words = shlex.split(line)
        if words[0] == "folder":
            answers.append(bool(w.folderDoesNotExist(wallet_name, words[1])))
        else:
            answers.append(bool(w.keyDoesNotExist(wallet_name, words[1], words[2])))
    print(" ".join("true" if a else "false" for a in answers))


def make_folder(folder, appid="seed"):
    """createFolder in the login wallet, as KWallet::Wallet::createFolder calls it."""
    w = wallet()
    h = w.open("kdewallet", 0, appid)
    expect(True, bool(w.createFolder(h, folder, appid)), "createFolder")


def wallet_methods():
    """disconnectApplication, closeAllWallets, sync, reconfigure, openPath and their signals."""
    from dbus.mainloop.glib import DBusGMainLoop
    from gi.repository import GLib
    bus = dbus.SessionBus(mainloop=DBusGMainLoop())
    w = wallet(bus)
    heard = []
    bus.add_signal_receiver(lambda *args, **kw: heard.append((kw["member"], [str(a) if isinstance(a, str) else int(a) for a in args])),
                            None, "org.kde.KWallet", None, PATH, member_keyword="member")
    h = int(w.open("kdewallet", 0, "app-a"))
    expect(h, int(w.open("kdewallet", 0, "app-b")))
    w.sync(h, "app-a")
    w.reconfigure()
    expect(True, bool(w.disconnectApplication("kdewallet", "app-a")))
    expect(False, bool(w.disconnectApplication("kdewallet", "app-a")), "a second time")
    expect([], list(w.folderList(h, "app-a")), "app-a's hold is gone")
    expect(True, len(w.folderList(h, "app-b")) >= 0 and bool(w.isOpen(dbus.Int32(h), signature="i")), "app-b's stays")
    expect(["app-b"], [str(u) for u in w.users("kdewallet")])
    if OURS:
        # kwalletd 5.103's openPath answers 0 at once whatever happens (its result goes nowhere).
        expect(-1, int(w.openPath("/nonexistent/wallet.kwl", 0, "app-a")), "openPath of nothing")
    w.closeAllWallets()
    expect(False, bool(w.isOpen("kdewallet", signature="s")))
    expect([], list(w.folderList(h, "app-b")), "closed for every holder")
    loop = GLib.MainLoop()
    GLib.timeout_add(500, loop.quit)
    loop.run()
    members = [m for m, _ in heard]
    expect(True, ("applicationDisconnected", ["kdewallet", "app-a"]) in heard, "applicationDisconnected in %r" % heard)
    for member in ("walletClosedId", "allWalletsClosed"):
        expect(True, member in members, "%s in %r" % (member, members))
    expect(True, ("walletClosed", [h]) in heard and ("walletClosed", ["kdewallet"]) in heard, "both walletClosed in %r" % heard)


def timing(count):
    """Seconds per readPassword and per writePassword, over `count` calls each."""
    w = wallet()
    h = w.open("kdewallet", 0, "timing")
    start = time.perf_counter()
    for i in range(int(count)):
        w.writePassword(h, "Timing", "k%d" % (i % 50), "secret %d" % i, "timing")
    wrote = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(int(count)):
        w.readPassword(h, "Timing", "k%d" % (i % 50), "timing")
    read = time.perf_counter() - start
    print("write %.2f ms, read %.2f ms" % (wrote * 1000 / int(count), read * 1000 / int(count)))


def open_many(count, name="kdewallet"):
    """`count` openAsync calls at once from one connection; prints the handles the signals bring,
    in the order of their transactions."""
    from dbus.mainloop.glib import DBusGMainLoop
    from gi.repository import GLib
    bus = dbus.SessionBus(mainloop=DBusGMainLoop())
    w = wallet(bus)
    results = {}
    loop = GLib.MainLoop()

    def opened(tid, handle):
        results[int(tid)] = int(handle)
        if len(results) == int(count):
            loop.quit()

    bus.add_signal_receiver(opened, "walletAsyncOpened", "org.kde.KWallet", None, PATH)
    for _ in range(int(count)):
        w.openAsync(name, 0, "many", True)
    GLib.timeout_add_seconds(30, loop.quit)
    loop.run()
    print(" ".join(str(h) for _, h in sorted(results.items())))


def items_invalidated():
    """A KWallet write tells the Secret Service's clients that the collection's Items changed."""
    from dbus.mainloop.glib import DBusGMainLoop
    from gi.repository import GLib
    bus = dbus.SessionBus(mainloop=DBusGMainLoop())
    w = wallet(bus)
    h = w.open("kdewallet", 0, "items")
    heard = []
    loop = GLib.MainLoop()

    def changed(interface, values, invalidated, path=None):
        heard.append((str(path), str(interface), [str(i) for i in invalidated]))
        loop.quit()

    bus.add_signal_receiver(changed, "PropertiesChanged", "org.freedesktop.DBus.Properties", None, None, path_keyword="path")
    expect(0, w.writePassword(h, "Passwords", "new", "v", "items"))
    GLib.timeout_add_seconds(5, loop.quit)
    loop.run()
    expect([("/org/freedesktop/secrets/collection/login", "org.freedesktop.Secret.Collection", ["Items"])], heard)


def wallets():
    print(" ".join(str(n) for n in wallet().wallets()))


def defaults():
    w = wallet()
    print(str(w.localWallet()), str(w.networkWallet()))


def delete(name):
    print(int(wallet().deleteWallet(name)))


def confined_view(app):
    """A sandboxed app: its own entries and folders only, in the wallet it shares."""
    w = wallet()
    h = w.open("kdewallet", 0, app)
    expect(True, h > 0)
    folders = sorted(str(f) for f in w.folderList(h, app))
    expect(["Form Data", "Passwords"], folders, "the app's own view starts as a new wallet")
    expect(False, bool(w.hasEntry(h, "Passwords", "mail", app)), "the unconfined entry")
    expect("", str(w.readPassword(h, "Passwords", "mail", app)))
    expect(0, w.writePassword(h, "Passwords", "mail", "app's own", app))
    expect("app's own", str(w.readPassword(h, "Passwords", "mail", app)))
    expect(-1, w.renameEntry(h, "Passwords", "other", "x", app))
    expect(-1, int(w.open("AppWallet", 0, app)), "a sandboxed app makes no keychain")
    expect(-1, int(w.deleteWallet("kdewallet")), "nor deletes one")
    expect(False, bool(w.disconnectApplication("kdewallet", "seed")), "nor disconnects another")
    expect(1, int(w.close(h, True, app, signature="ibs")), "its forced close leaves the wallet open")
    expect(True, bool(w.isOpen(h, signature="i")), "for the others that hold it")


def users_seen(appid):
    """The appids users() names for the login wallet, as a caller holding it under APPID sees them."""
    w = wallet()
    expect(True, int(w.open("kdewallet", 0, appid)) > 0, "a handle")
    print(" ".join(sorted(str(a) for a in w.users("kdewallet"))))


def holds_are_bounded():
    """One connection holds the wallet under at most 256 appids; the next open is -1."""
    w = wallet()
    for n in range(256):
        expect(True, int(w.open("kdewallet", 0, "app-%d" % n)) > 0, "hold %d" % n)
    expect(-1, int(w.open("kdewallet", 0, "app-256")), "the 257th appid")
    expect(True, int(w.open("kdewallet", 0, "app-7")) > 0, "an appid already held")


def read_password(folder, key, appid="reader"):
    w = wallet()
    h = w.open("kdewallet", 0, appid)
    print(str(w.readPassword(h, folder, key, appid)))


def pam_open(password):
    """pam_kwallet's call: the wallet opened with PBKDF2-SHA512 of the password and the salt file."""
    import hashlib
    salt_file = os.path.expanduser("~/.local/share/kwalletd/kdewallet.salt")
    if not os.path.exists(salt_file):
        os.makedirs(os.path.dirname(salt_file), exist_ok=True)
        with open(salt_file, "wb") as f:
            f.write(os.urandom(56))
    with open(salt_file, "rb") as f:
        salt = f.read()
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 50000, 56)
    msg = dbus.lowlevel.MethodCallMessage(BUS, PATH, "org.kde.KWallet", "pamOpen")
    msg.append("kdewallet", dbus.ByteArray(key), 0, signature="sayi")
    msg.set_no_reply(True)
    bus = dbus.SessionBus()
    bus.send_message(msg)
    bus.flush()
    deadline = time.time() + 10
    while time.time() < deadline and not wallet(bus).isOpen("kdewallet", signature="s"):
        time.sleep(0.1)


if __name__ == "__main__":
    globals()[sys.argv[1]](*sys.argv[2:])
