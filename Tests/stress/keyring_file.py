#!/usr/bin/python3
"""gnome-keyring's keyring files, written as gnome-keyring-daemon 42 writes them: for the fuzzing
of `security import-secrets` (Tests/stress) and for `make bench`'s import of a keyring too large
to fill through the daemon itself (it rewrites its file on every store).

  keyring_file.py OUT COUNT PASSWORD [--shared | --bare]
      Writes an encrypted keyring of COUNT items as libsecret's generic schema stores them
      (`secret-tool store`, python-keyring): xdg:schema, service and username. With --shared,
      every item has the same label and attributes and a secret of its own: look-alikes, which
      gnome-keyring keeps as items of their own (and which made each item of an import read
      every earlier one). With --bare, items with no label and no attributes, each a secret of its
      own: the smallest items, so the most in a file of a given size (about 67 bytes each).

An item is (label, secret, [(name, value)...], item type); a value is a string or, for a uint32
attribute, an int.
"""
import hashlib
import os
import struct
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def string(s):
    if s is None:
        return struct.pack(">I", 0xFFFFFFFF)
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(">I", len(b)) + b


def attributes(pairs, hashed):
    out = struct.pack(">I", len(pairs))
    for name, value in pairs:
        out += string(name)
        if isinstance(value, int):
            out += struct.pack(">II", 1, value)
        else:
            out += struct.pack(">I", 0) + string(hashlib.md5(value.encode()).hexdigest() if hashed else value)
    return out


def encrypted_keyring(items, password, salt, iterations=1500):
    """The encrypted format: header, hashed index, then AES-128-CBC under iterated SHA-256."""
    # Parts joined once: appending to one bytes object copied it whole for every item.
    out = [b"GnomeKeyring\n\r\0\n" + bytes(4) + string("Fuzz") + struct.pack(">QQIII", 0, 0, 0, 0, iterations) + salt + bytes(16)]
    out.append(struct.pack(">I", len(items)))
    for n, (label, secret, attrs, kind) in enumerate(items):
        out.append(struct.pack(">II", n + 1, kind) + attributes(attrs, True))
    out = b"".join(out)
    inner = []
    for label, secret, attrs, kind in items:
        inner.append(string(label) + string(secret) + struct.pack(">QQ", 1_700_000_000, 1_700_000_100))
        inner.append(string(None) + bytes(16) + attributes(attrs, False) + struct.pack(">I", 0))
    inner = b"".join(inner)
    inner += bytes(-(len(inner) + 16) % 16)
    plain = hashlib.md5(inner).digest() + inner
    digest = hashlib.sha256(password + salt).digest()
    for _ in range(iterations - 1):
        digest = hashlib.sha256(digest).digest()
    encryptor = Cipher(algorithms.AES(digest[:16]), modes.CBC(digest[16:])).encryptor()
    sealed = encryptor.update(plain) + encryptor.finalize()
    return out + struct.pack(">I", len(sealed)) + sealed


def plain_keyring(items):
    lines = ["[keyring]", "display-name=Fuzz", ""]
    for n, (label, secret, attrs, kind) in enumerate(items):
        lines += [f"[{n + 1}]", f"item-type={kind}", f"display-name={label}", f"secret={secret}", "mtime=5", "ctime=4", ""]
        for i, (name, value) in enumerate(attrs):
            kind_name = "uint32" if isinstance(value, int) else "string"
            lines += [f"[{n + 1}:attribute{i}]", f"name={name}", f"type={kind_name}", f"value={value}", ""]
    return "\n".join(lines).encode()


if __name__ == "__main__":
    out, count, password = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
    mode = sys.argv[4] if len(sys.argv) > 4 else None
    if mode == "--bare":
        items = [("", f"{n:x}", [], 0) for n in range(count)]
    elif mode == "--shared":
        pairs = [("xdg:schema", "org.freedesktop.Secret.Generic"), ("service", "service"), ("username", "user")]
        items = [("Password for user on service", f"secret-{n}", pairs, 0) for n in range(count)]
    else:
        items = [(f"Password for user{n} on service{n}", f"secret-{n}",
                  [("xdg:schema", "org.freedesktop.Secret.Generic"), ("service", f"service{n}"), ("username", f"user{n}")], 0)
                 for n in range(count)]
    with open(out, "wb") as f:
        f.write(encrypted_keyring(items, password, os.urandom(8)))
