#!/usr/bin/python3
"""KWallet's D-Bus API as KDE's programs and pam_kwallet5 call it, for Tests/kde/run.sh.

  kde.py pamopen WALLET PASSWORD [SERVICE]   opens (creates) WALLET as pam_kwallet5 does: the salt
                                             file, PBKDF2-HMAC-SHA512, pamOpen; prints the handle
  kde.py fill WALLET [SERVICE]               folders, passwords, maps, binary entries, an empty folder
  kde.py dump WALLET [SERVICE]               every folder and entry: type and value's bytes (hex)
  kde.py dump-native WALLET [SERVICE]        the same without the items of kwalletd's Secret Service
  kde.py write WALLET FOLDER KEY TYPE HEX    one entry through writeEntry
  kde.py sync WALLET...                      each wallet's file written now
  kde.py wallets [SERVICE]                   the wallet names, one a line
  kde.py qstring TEXT                        Qt's QDataStream form of a QString, in hex
  kde.py expected WALLET COLLECTION          the wallet as the keychain's Secret Service is to show it
                                             after an import: one line per item (see item_line)
  kde.py actual COLLECTION...                what the Secret Service shows of those collections
  kde.py ss-store LABEL SECRET               an item without attributes, through SecretStorage
  kde.py ss-collections | ss-count           the Secret Service's collections; its number of items
  kde.py keepass-xml                         a KeePass XML database whose root group FdoSecrets exposes
SERVICE: org.kde.kwalletd5 (default) or org.kde.kwalletd6.
"""
import hashlib
import json
import os
import uuid
import sys
import time

import dbus
import secretstorage

APP = "keychain-tests"
# pam_kwallet's KWALLET_PAM_KEYSIZE, KWALLET_PAM_SALTSIZE and KWALLET_PAM_ITERATIONS.
KEY_SIZE, SALT_SIZE, ITERATIONS = 56, 56, 50000


def kwallet(service):
    path = "/modules/" + service.split(".")[-1]
    return dbus.Interface(dbus.SessionBus().get_object(service, path, introspect=False), "org.kde.KWallet")


def qstring(text):
    data = text.encode("utf-16-be")
    return len(data).to_bytes(4, "big") + data


def qmap(pairs):
    # Qt 5 writes a QMap as its count, then its pairs from the last key to the first.
    out = len(pairs).to_bytes(4, "big")
    for key in sorted(pairs, key=lambda k: k.encode("utf-16-be"), reverse=True):
        out += qstring(key) + qstring(pairs[key])
    return out


def salt_file(wallet):
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    folder = os.path.join(data, "kwalletd")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, wallet + ".salt")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(os.urandom(SALT_SIZE))
    with open(path, "rb") as f:
        return f.read()


def pamopen(wallet, password, service):
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt_file(wallet), ITERATIONS, KEY_SIZE)
    api = kwallet(service)
    # pamOpen is a no-reply method: whether it opened the wallet shows in isOpen.
    api.pamOpen(wallet, dbus.ByteArray(key), dbus.Int32(0), signature="sayi")
    for _ in range(100):
        if api.isOpen(wallet, signature="s"):
            return
        time.sleep(0.05)
    sys.exit("pamOpen(%s) did not open it" % wallet)


def handle_of(api, wallet):
    handle = int(api.open(wallet, dbus.Int64(0), APP, signature="sxs"))
    if handle < 0:
        sys.exit("open(%s) answered %d" % (wallet, handle))
    return handle


def write(api, handle, folder, key, kind, value):
    rc = api.writeEntry(handle, folder, key, dbus.ByteArray(value), dbus.Int32(kind), APP, signature="issayis")
    if rc != 0:
        sys.exit("writeEntry(%s/%s) answered %d" % (folder, key, rc))


# What fill stores: (folder, key, type, value). Type 1 password, 2 binary, 3 map.
ENTRIES = [
    ("Passwords", "mail.example", 1, qstring("pässwörd ✓")),
    ("Passwords", "empty", 1, qstring("")),
    ("Network Management", "{b2a5c0f4-wifi}", 3, qmap({"802-11-wireless-security.psk": "wifi-secret", "ssid": "Home"})),
    ("Form Data", "https://example.org/login", 3, qmap({})),
    ("Konversation", "certificate", 2, bytes(range(256)) + b"\x00\xff"),
    ("Konversation", "null password", 1, b"\xff\xff\xff\xff"),
]


def fill(wallet, service):
    api = kwallet(service)
    handle = handle_of(api, wallet)
    for folder in sorted({e[0] for e in ENTRIES}) + ["Empty Folder"]:
        api.createFolder(handle, folder, APP, signature="iss")
    for folder, key, kind, value in ENTRIES:
        write(api, handle, folder, key, kind, value)
    api.writePassword(handle, "Passwords", "kde-api", "through writePassword", APP, signature="issss")
    api.sync(handle, APP, signature="is")


def stored_items(wallet):
    """What kwalletd's Secret Service keeps of the wallet's items ("Folder/key": parameters)."""
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    try:
        with open(os.path.join(data, "kwalletd", wallet + "_attributes.json")) as f:
            return {k: v for k, v in json.load(f).items() if isinstance(v, dict)}
    except FileNotFoundError:
        return {}


def dump(wallet, service, native_only=False):
    """native_only: without the entries kwalletd's Secret Service made (and the folders only they
    filled), which an import brings as Secret Service items, not as KWallet entries."""
    skipped = stored_items(wallet) if native_only else {}
    api = kwallet(service)
    handle = handle_of(api, wallet)
    for folder in sorted(api.folderList(handle, APP, signature="is")):
        keys = sorted(api.entryList(handle, folder, APP, signature="iss"))
        native = [key for key in keys if folder + "/" + key not in skipped]
        if keys and not native:
            continue
        print("folder %s" % folder)
        for key in native:
            kind = int(api.entryType(handle, folder, key, APP, signature="isss"))
            value = bytes(api.readEntry(handle, folder, key, APP, signature="isss", byte_arrays=True))
            print("  %s %d %s" % (key, kind, value.hex()))


def read_qstring(value):
    """The text of exactly one QString that re-serializes to the same bytes, else None."""
    if len(value) < 4 or value[:4] == b"\xff\xff\xff\xff":
        return None
    size = int.from_bytes(value[:4], "big")
    if size % 2 or 4 + size != len(value):
        return None
    try:
        text = value[4:].decode("utf-16-be")
    except UnicodeDecodeError:
        return None
    return text if qstring(text) == value else None


def item_line(collection, label, attributes, secret):
    pairs = ",".join("%s=%s" % pair for pair in sorted(attributes.items()))
    return "%s\t%s\t%s\t%s" % (collection, label, pairs, secret.hex())


TYPES = {0: "unknown", 1: "password", 2: "stream", 3: "map"}


def fdo_label(folder, key):
    # kwalletd's FdoUniqueLabel: "__N_" dropped; the folder named unless it is its own.
    if key.endswith("_"):
        head, sep, number = key[:-1].rpartition("__")
        if sep and number.isdigit():
            key = head
    return key if folder == "Secret Service" else folder + "/" + key


def expected(wallet, collection, service):
    """The contract's mapping, written again here: a native entry is one item labelled
    Folder/key with kwallet.* attributes (a password as its text unless it is not exactly one
    QString); an item kwalletd's Secret Service stored keeps its label and attributes."""
    stored = stored_items(wallet)
    api = kwallet(service)
    handle = handle_of(api, wallet)
    lines = []
    for folder in api.folderList(handle, APP, signature="is"):
        for key in api.entryList(handle, folder, APP, signature="iss"):
            kind = int(api.entryType(handle, folder, key, APP, signature="isss"))
            value = bytes(api.readEntry(handle, folder, key, APP, signature="isss", byte_arrays=True))
            text = read_qstring(value) if kind == 1 else None
            params = stored.get(folder + "/" + key)
            if params is not None:
                secret = text.encode() if text is not None else value
                lines.append(item_line(collection, fdo_label(folder, key), params.get("attributes", {}), secret))
                continue
            attributes = {"kwallet.folder": folder, "kwallet.key": key, "kwallet.type": TYPES[kind],
                          "service": folder, "username": key}
            if kind == 1 and text is None:
                attributes["kwallet.raw"] = "1"
            secret = text.encode() if text is not None else value
            lines.append(item_line(collection, folder + "/" + key, attributes, secret))
    for line in sorted(lines):
        print(line)


def actual(collections):
    connection = secretstorage.dbus_init()
    lines = []
    for collection in secretstorage.get_all_collections(connection):
        name = collection.collection_path.split("/")[-1]
        if name not in collections:
            continue
        for item in collection.get_all_items():
            lines.append(item_line(name, item.get_label(), item.get_attributes(), item.get_secret()))
    for line in sorted(lines):
        print(line)


def keepass_xml():
    group = uuid.uuid4()
    print("""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<KeePassFile>
 <Meta>
  <Generator>keychain-tests</Generator>
  <DatabaseName>Passwords</DatabaseName>
  <CustomData>
   <Item><Key>FDO_SECRETS_EXPOSED_GROUP</Key><Value>{%s}</Value></Item>
  </CustomData>
 </Meta>
 <Root>
  <Group>
   <UUID>%s</UUID>
   <Name>Passwords</Name>
  </Group>
 </Root>
</KeePassFile>""" % (group, __import__("base64").b64encode(group.bytes).decode()))


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "pamopen":
        pamopen(args[0], args[1], args[2] if len(args) > 2 else "org.kde.kwalletd5")
    elif command == "fill":
        fill(args[0], args[1] if len(args) > 1 else "org.kde.kwalletd5")
    elif command == "dump":
        dump(args[0], args[1] if len(args) > 1 else "org.kde.kwalletd5")
    elif command == "dump-native":
        dump(args[0], args[1] if len(args) > 1 else "org.kde.kwalletd5", native_only=True)
    elif command == "write":
        api = kwallet(os.environ.get("KWALLET_SERVICE", "org.kde.kwalletd5"))
        write(api, handle_of(api, args[0]), args[1], args[2], int(args[3]), bytes.fromhex(args[4]))
    elif command == "wallets":
        for name in kwallet(args[0] if args else "org.kde.kwalletd5").wallets():
            print(name)
    elif command == "sync":
        # kwalletd writes a wallet's file on a timer; a SIGTERM before it loses what came since.
        api = kwallet(os.environ.get("KWALLET_SERVICE", "org.kde.kwalletd5"))
        for wallet in args:
            api.sync(handle_of(api, wallet), APP, signature="is")
    elif command == "qstring":
        print(qstring(args[0]).hex())
    elif command == "expected":
        expected(args[0], args[1], os.environ.get("KWALLET_SERVICE", "org.kde.kwalletd5"))
    elif command == "actual":
        actual(args)
    elif command == "ss-store":
        # Tried again where kwalletd loses the session just opened (see ss_store in run.sh).
        for attempt in range(3):
            connection = secretstorage.dbus_init()
            try:
                secretstorage.get_default_collection(connection).create_item(args[0], {}, args[1].encode())
                break
            except Exception as error:  # jeepney's DBusErrorResponse, as SecretStorage raises it
                flaky = "Can't find session" in str(error) or "public key size is invalid" in str(error)
                if not flaky or attempt == 2:
                    raise
    elif command == "ss-collections":
        for collection in secretstorage.get_all_collections(secretstorage.dbus_init()):
            print(collection.collection_path, "locked" if collection.is_locked() else "unlocked")
    elif command == "ss-count":
        connection = secretstorage.dbus_init()
        print(sum(len(list(c.get_all_items())) for c in secretstorage.get_all_collections(connection)))
    elif command == "keepass-xml":
        keepass_xml()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
