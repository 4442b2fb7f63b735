"""Writes .kwl files of the kinds kwalletd 5.103 no longer writes, from its C++ source
(kwalletbackend.cc: password2hash; backendpersisthandler.cpp: BlowfishPersistHandler::write):
format 0.0 with the SHA-1 key, Blowfish-CBC (cipher 3) or the oldest Blowfish-ECB (cipher 0).
Independent of the Swift reader: Python's hashlib and python3-cryptography's Blowfish.
Usage: kwl-legacy-writer.py OUTPUT_DIR (Tests/import/crafted_kwl.py uses its write()).
"""
import hashlib, os, struct, sys, warnings

warnings.simplefilter("ignore")
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def kwallet_sha1(message: bytes) -> bytes:
    """sha1.cc as built: Q_BYTE_ORDER forced to big-endian, so on a little-endian machine it
    reads each word of a block little-endian and writes the digest's words little-endian."""
    rol = lambda x, n: ((x << n) | (x >> (32 - n))) & 0xFFFFFFFF
    h = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0]
    padded = message + b"\x80" + b"\0" * ((55 - len(message)) % 64) + struct.pack(">Q", len(message) * 8)
    for at in range(0, len(padded), 64):
        w = list(struct.unpack("<16I", padded[at:at + 64]))
        for i in range(16, 80):
            w.append(rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1))
        a, b, c, d, e = h
        for i in range(80):
            if i < 20:
                f, k = (b & c) | (~b & d), 0x5A827999
            elif i < 40:
                f, k = b ^ c ^ d, 0x6ED9EBA1
            elif i < 60:
                f, k = (b & c) | (b & d) | (c & d), 0x8F1BBCDC
            else:
                f, k = b ^ c ^ d, 0xCA62C1D6
            a, b, c, d, e = (rol(a, 5) + f + e + k + w[i]) & 0xFFFFFFFF, a, rol(b, 30), c, d
        h = [(x + y) & 0xFFFFFFFF for x, y in zip(h, [a, b, c, d, e])]
    return struct.pack("<5I", *h)


def password2hash(password: bytes) -> bytes:
    def block(piece):
        # Hashed once, then its digest 1999 more times: 2000 in all, as the loop in the source.
        digest = kwallet_sha1(piece)
        for _ in range(1999):
            digest = kwallet_sha1(digest)
        return digest

    b = [block(password[:16])]
    if len(password) > 16:
        b.append(block(password[16:32]))
    if len(password) > 32:
        b.append(block(password[32:48]))
    if len(password) > 48:
        b.append(block(password[48:]))
    if len(b) == 4:
        return b"".join(x[:14] for x in b)
    if len(b) == 3:
        return b[0] + b[1] + b[2][:16]
    return b"".join(b)


def qstring(s: str) -> bytes:
    raw = s.encode("utf-16-be")
    return struct.pack(">I", len(raw)) + raw


def qbytes(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def write(path, password: bytes, folders, ecb=False):
    """folders: {name: {key: (type, value)}}, kept in QMap order (by UTF-16)."""
    order = lambda d: sorted(d, key=lambda s: s.encode("utf-16-be"))
    index = struct.pack(">I", len(folders))
    plain = b""
    for f in order(folders):
        entries = folders[f]
        plain += qstring(f) + struct.pack(">I", len(entries))
        index += hashlib.md5(f.encode()).digest() + struct.pack(">I", len(entries))
        for k in order(entries):
            t, v = entries[k]
            plain += qstring(k) + struct.pack(">i", t) + qbytes(v)
            index += hashlib.md5(k.encode()).digest()
    size = len(plain) + 8 + 4 + 20
    delta = 8 - size % 8
    whole = os.urandom(8) + struct.pack(">I", len(plain)) + plain + os.urandom(delta) + kwallet_sha1(plain)
    key = password2hash(password)
    mode = modes.ECB() if ecb else modes.CBC(b"\0" * 8)
    enc = Cipher(algorithms.Blowfish(key), mode).encryptor()
    body = enc.update(whole) + enc.finalize()
    version = bytes([0, 0, 0 if ecb else 3, 0])
    with open(path, "wb") as out:
        out.write(b"KWALLET\n\r\0\r\n" + version + index + body)


if __name__ == "__main__":
    out = sys.argv[1]
    contents = {
        "Passwords": {"imap://bob@example.org": (1, qstring("legacy-secret"))},
        "Form Data": {},
        "Binary": {"bytes": (3 - 1, bytes([0, 1, 2, 254, 255]))},
    }
    # Passwords of 1, 3 and 4 SHA-1 blocks: the 20-, 56 (20/20/16)- and 56 (14x4)-byte keys.
    write(os.path.join(out, "legacy-sha1.kwl"), b"legacy", contents)
    write(os.path.join(out, "legacy-sha1-40.kwl"), b"a forty character legacy wallet password", contents)
    write(os.path.join(out, "legacy-ecb-60.kwl"), b"sixty characters of password for the oldest ECB-mode wallets", contents, ecb=True)
