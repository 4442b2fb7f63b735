"""Fills wallets through the running kwalletd5 (see make-kwl-fixtures.sh) and copies its files.

kdewallet: opened by pamOpen with a fresh 56-byte salt; a password, a non-ASCII folder and key,
a map (written by kwallet-query, so Qt's own QMap bytes), a binary entry, an empty folder, and an
item stored through kwalletd's Secret Service (its attributes go to kdewallet_attributes.json).
"""
import hashlib, os, shutil, subprocess, sys, time
import dbus

PASSWORD = "kwl fixture pässword"
data = os.path.join(os.environ["XDG_DATA_HOME"], "kwalletd")
out = os.environ["KWL_OUT"]
bus = dbus.SessionBus()
log = open(os.path.join(os.environ["HOME"], "kwalletd.log"), "ab")
APP = "kwl-fixtures"


def start_kwalletd():
    daemon = subprocess.Popen(["kwalletd5"], stdout=log, stderr=log)
    for _ in range(100):
        if bus.name_has_owner("org.kde.kwalletd5"):
            break
        time.sleep(0.1)
    else:
        sys.exit("kwalletd5 did not take its name")
    return daemon, dbus.Interface(bus.get_object("org.kde.kwalletd5", "/modules/kwalletd5"), "org.kde.KWallet")


def stop_kwalletd(daemon):
    daemon.terminate()
    daemon.wait(timeout=30)
    for _ in range(100):
        if not bus.name_has_owner("org.kde.kwalletd5"):
            break
        time.sleep(0.1)


daemon, kw = start_kwalletd()


def pam_open(wallet, password):
    path = os.path.join(data, wallet + ".salt")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(os.urandom(56))
    with open(path, "rb") as f:
        salt = f.read()
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 50000, 56)
    # A no-reply call in kwalletd's interface, as pam_kwallet's socket hand-over makes it.
    kw.pamOpen(wallet, dbus.ByteArray(key), 0)
    for _ in range(100):
        if kw.isOpen(wallet, signature="s"):
            break
        time.sleep(0.1)
    else:
        sys.exit(f"pamOpen did not open {wallet}")
    handle = kw.open(wallet, dbus.Int64(0), APP, signature="sxs")
    assert handle >= 0, f"open {wallet}: {handle}"
    return handle


h = pam_open("kdewallet", PASSWORD)
assert kw.writePassword(h, "Passwords", "smtp://alice@example.org", "s3cret", APP) == 0
assert kw.writePassword(h, "Ünïcødé €", "clé 🔑", "mot de passe ✓", APP) == 0
# A placeholder map that kwallet-query then overwrites with Qt's own serialization.
placeholder = b"\x00\x00\x00\x00"
assert kw.writeMap(h, "Form Data", "https://example.org/login", dbus.ByteArray(placeholder), APP) == 0
assert kw.writeEntry(h, "Binary", "blob", dbus.ByteArray(bytes(range(256)) + b"\x00\xff"), 2, APP, signature="issayis") == 0
assert kw.createFolder(h, "Empty Folder", APP)
kw.sync(h, APP)
env = dict(os.environ)
# ASCII JSON: kwallet-query reads its input as Latin-1.
subprocess.run(["kwallet-query", "-w", "https://example.org/login", "-f", "Form Data", "kdewallet"],
               input=b'{"user": "alice", "pass": "p\\u00e4ss"}\n', check=True, env=env, timeout=30)
check = subprocess.run(["kwallet-query", "-r", "https://example.org/login", "-f", "Form Data", "kdewallet"],
                       capture_output=True, check=True, env=env, timeout=30).stdout
assert b"alice" in check, check
kw.sync(h, APP)
assert kw.close(h, True, APP, signature="ibs") >= 0

# kwalletd's Secret Service shows the wallets it found at its start: a second start, as a login.
stop_kwalletd(daemon)
daemon, kw = start_kwalletd()
h = pam_open("kdewallet", PASSWORD)
# A Secret Service item: kwalletd keeps it in the folder "Secret Service" and its attributes,
# label and content type in kdewallet_attributes.json.
secrets = bus.get_object("org.freedesktop.secrets", "/org/freedesktop/secrets")
service = dbus.Interface(secrets, "org.freedesktop.Secret.Service")
_, session = service.OpenSession("plain", dbus.String("", variant_level=1))
collection = [c for c in dbus.Interface(secrets, "org.freedesktop.DBus.Properties").Get(
    "org.freedesktop.Secret.Service", "Collections") if c.endswith("/kdewallet")]
collection = collection[0]
# kwalletd's collection keeps a handle of its own: its Unlock prompt opens the wallet, which is
# open already, so no dialog shows.
unlocked, prompt = service.Unlock([collection])
if prompt != "/":
    dbus.Interface(bus.get_object("org.freedesktop.secrets", prompt), "org.freedesktop.Secret.Prompt").Prompt("")
    collection_properties = dbus.Interface(bus.get_object("org.freedesktop.secrets", collection), "org.freedesktop.DBus.Properties")
    for _ in range(100):
        if not collection_properties.Get("org.freedesktop.Secret.Collection", "Locked"):
            break
        time.sleep(0.1)
    else:
        sys.exit("kwalletd's collection stayed locked")
properties = {
    "org.freedesktop.Secret.Item.Label": "GitHub token",
    "org.freedesktop.Secret.Item.Attributes": dbus.Dictionary({"service": "github.com", "username": "alice"}, signature="ss"),
}
item, prompt = dbus.Interface(bus.get_object("org.freedesktop.secrets", collection), "org.freedesktop.Secret.Collection").CreateItem(
    properties, (session, dbus.ByteArray(b""), dbus.ByteArray(b"ghp_fixture"), "text/plain"), False)
assert prompt == "/", prompt
kw.sync(h, APP)
assert kw.close(h, True, APP, signature="ibs") >= 0

# A second wallet, imported into the keychain of its name.
h = pam_open("work", "work password")
assert kw.writePassword(h, "Passwords", "vpn", "vpn-secret", APP) == 0
kw.sync(h, APP)
assert kw.close(h, True, APP, signature="ibs") >= 0

stop_kwalletd(daemon)
for name in ("kdewallet.kwl", "kdewallet.salt", "kdewallet_attributes.json", "work.kwl", "work.salt"):
    shutil.copy(os.path.join(data, name), os.path.join(out, name))
