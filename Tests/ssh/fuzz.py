"""Bad input for an SSH agent's socket (draft-miller-ssh-agent).

fuzz.py SOCKET AGENT_PID COUNT: sends malformed, truncated, unknown, oversized messages and
hostile key blobs, each on a connection of its own, then a fixed-seed random run of COUNT more
(bounded in time too). After each, the agent must have answered SSH_AGENT_FAILURE (or what the
message's kind permits, see `allowed`) or closed the connection, never hung, and must still answer
REQUEST_IDENTITIES on a fresh connection; its resident memory must not grow past a generous bound.

fuzz.py --refused SOCKET: run as another user than the agent's: the socket can be reached, and the
agent refuses the connection (closes it, or answers failure), never lists its keys.
"""

import os
import random
import socket
import struct
import sys
import time

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

FAILURE, SUCCESS = 5, 6
REQUEST_IDENTITIES, IDENTITIES_ANSWER = 11, 12
SIGN_REQUEST, SIGN_RESPONSE = 13, 14
ADD_IDENTITY, REMOVE_IDENTITY, REMOVE_ALL = 17, 18, 19
ADD_SMARTCARD_KEY, REMOVE_SMARTCARD_KEY = 20, 21
LOCK, UNLOCK = 22, 23
ADD_ID_CONSTRAINED, ADD_SMARTCARD_KEY_CONSTRAINED = 25, 26
EXTENSION, EXTENSION_FAILURE = 27, 28
SSH1_REMOVE_ALL = 9
CLOSED = "closed"
REPLY_TIMEOUT = 10.0
RSS_BOUND_KIB = 32 * 1024


def string(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack(">I", len(b)) + b


def mpint(n):
    if n == 0:
        return string(b"")
    raw = n.to_bytes((n.bit_length() + 8) // 8, "big")
    return string(raw)


def u32(n):
    return struct.pack(">I", n)


def frame(body):
    return u32(len(body)) + body


def exchange(path, data, shut=False):
    """Sends raw bytes on a new connection: the answer's type, CLOSED, or raises on a hang."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(REPLY_TIMEOUT)
    try:
        s.connect(path)
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            return CLOSED
        header = recv_exact(s, 4)
        if header is None:
            return CLOSED
        (length,) = struct.unpack(">I", header)
        if length == 0 or length > 1 << 20:
            raise AssertionError(f"an answer of length {length}")
        body = recv_exact(s, length)
        if body is None:
            raise AssertionError("an answer cut short")
        return body[0]
    except socket.timeout:
        raise AssertionError("no answer and no close within %.0f s" % REPLY_TIMEOUT)
    finally:
        s.close()


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        try:
            chunk = s.recv(n - len(out))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        out += chunk
    return out


# --- real keys, in OpenSSH's private serialization (contract 1) ---------------------------------

def ed25519_key(rng):
    k = ed25519.Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
    seed = k.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    pk = k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return string("ssh-ed25519") + string(pk) + string(seed + pk), pk


CURVES = {256: (ec.SECP256R1(), "nistp256"), 384: (ec.SECP384R1(), "nistp384"), 521: (ec.SECP521R1(), "nistp521")}


def ecdsa_key(bits):
    curve, name = CURVES[bits]
    k = ec.generate_private_key(curve)
    n = k.public_key().public_numbers()
    size = (bits + 7) // 8
    q = b"\x04" + n.x.to_bytes(size, "big") + n.y.to_bytes(size, "big")
    return "ecdsa-sha2-" + name, name, q, k.private_numbers().private_value


def rsa_fields(bits):
    k = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    p = k.private_numbers()
    return p.public_numbers.n, p.public_numbers.e, p.d, p.iqmp, p.p, p.q


def rsa_key(n, e, d, iqmp, p, q):
    return string("ssh-rsa") + mpint(n) + mpint(e) + mpint(d) + mpint(iqmp) + mpint(p) + mpint(q)


def add(key, comment="fuzz"):
    return frame(bytes([ADD_IDENTITY]) + key + string(comment))


# --- the fixed cases ----------------------------------------------------------------------------

def hostile_cases(rng):
    """(name, raw bytes to send, answers allowed besides FAILURE and CLOSED, shut write side)."""
    cases = []

    def case(name, data, also=(), shut=False):
        cases.append((name, data, set(also), shut))

    good_ed, pk = ed25519_key(rng)
    # Framing.
    # OpenSSH's agent waits for a type byte after an empty message: the close ends that wait.
    case("an empty message", frame(b""), shut=True)
    case("a length and nothing else", u32(100), shut=True)
    case("half a length", b"\x00\x00", shut=True)
    case("a body shorter than its length", u32(100) + bytes([REQUEST_IDENTITIES]) + b"x" * 10, shut=True)
    case("a length over 256 KiB, no body", u32(256 * 1024 + 1), shut=True)
    case("a length of 4 GiB - 1", u32(0xFFFFFFFF), shut=True)
    big = bytes([ADD_IDENTITY]) + rng.randbytes(300 * 1024)
    case("a real 300 KiB message", frame(big))
    case("a 300 KiB key blob in a sign request", frame(bytes([SIGN_REQUEST]) + string(rng.randbytes(300 * 1024)) + string(b"data") + u32(0)))
    # Unknown and retired types (SSH1's among them).
    for t in (0, 1, 2, 3, 4, 7, 8, 10, 24, 29, 30, 100, 200, 255):
        case(f"message type {t}", frame(bytes([t]) + rng.randbytes(16)))
    # SSH1's "remove all RSA identities": OpenSSH's agent answers success (there are none).
    case("message type 9", frame(bytes([SSH1_REMOVE_ALL]) + rng.randbytes(16)), also={SUCCESS})
    case("an answer's type sent to the agent", frame(bytes([IDENTITIES_ANSWER]) + u32(0)))
    case("request identities with trailing bytes", frame(bytes([REQUEST_IDENTITIES]) + b"\x00" * 8), also={IDENTITIES_ANSWER})
    # ADD_IDENTITY: hostile key blobs.
    seed = rng.randbytes(32)
    case("ed25519: a 31-byte public key", add(string("ssh-ed25519") + string(pk[:31]) + string(seed + pk[:31])))
    case("ed25519: a 33-byte public key", add(string("ssh-ed25519") + string(pk + b"\x00") + string(seed + pk)))
    case("ed25519: a 63-byte private key", add(string("ssh-ed25519") + string(pk) + string((seed + pk)[:63])))
    case("ed25519: no comment", frame(bytes([ADD_IDENTITY]) + good_ed))
    case("ed25519: a string length past the end", frame(bytes([ADD_IDENTITY]) + string("ssh-ed25519") + u32(0xFFFFFF00) + pk))
    case("a key type of length 4 GiB - 1", frame(bytes([ADD_IDENTITY]) + u32(0xFFFFFFFF) + b"ssh-ed25519"))
    case("an empty key type", add(string("") + string(pk) + string(seed + pk)))
    case("an unknown key type", add(string("ssh-foo") + string(pk) + string(seed + pk)))
    case("a key type with a NUL", add(string("ssh-ed25519\x00x") + string(pk) + string(seed + pk)))
    case("a security-key type cut short", add(string("sk-ssh-ed25519@openssh.com") + string(pk) + string("ssh:")))
    case("a certificate type with a garbage certificate", add(string("ssh-ed25519-cert-v01@openssh.com") + string(rng.randbytes(200)) + string(seed + pk)))
    case("a certificate type with an empty certificate", add(string("ssh-ed25519-cert-v01@openssh.com") + string(b"") + string(pk) + string(seed + pk)))
    name, curve, q, d = ecdsa_key(256)
    case("ecdsa: a point off the curve", add(string(name) + string(curve) + string(b"\x04" + rng.randbytes(64)) + mpint(d)))
    case("ecdsa: a point of the wrong length", add(string(name) + string(curve) + string(q[:-1]) + mpint(d)))
    case("ecdsa: the point at infinity", add(string(name) + string(curve) + string(b"\x00") + mpint(d)))
    case("ecdsa: a curve that is not the type's", add(string(name) + string("nistp384") + string(q) + mpint(d)))
    case("ecdsa: an unknown curve", add(string("ecdsa-sha2-nistp999") + string("nistp999") + string(q) + mpint(d)))
    case("ecdsa: a zero private scalar", add(string(name) + string(curve) + string(q) + mpint(0)))
    order256 = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
    case("ecdsa: a private scalar equal to the order", add(string(name) + string(curve) + string(q) + mpint(order256)))
    case("ecdsa: a 10000-byte private scalar", add(string(name) + string(curve) + string(q) + string(b"\x01" + rng.randbytes(9999))))
    n, e, dd, iqmp, p, qq = rsa_fields(2048)
    small = rsa_fields(768)
    case("rsa: a 768-bit modulus", add(rsa_key(*small)))
    case("rsa: a 20000-byte modulus", add(string("ssh-rsa") + string(b"\x01" + rng.randbytes(19999)) + mpint(e) + mpint(dd) + mpint(iqmp) + mpint(p) + mpint(qq)))
    case("rsa: a negative modulus", add(string("ssh-rsa") + string(b"\x80" + n.to_bytes(256, "big")[1:]) + mpint(e) + mpint(dd) + mpint(iqmp) + mpint(p) + mpint(qq)))
    # RFC 4251 forbids the extra zero, OpenSSH's reader skips it: either answer.
    case("rsa: an mpint with a needless leading zero", add(string("ssh-rsa") + string(b"\x00\x00" + n.to_bytes(256, "big")) + mpint(e) + mpint(dd) + mpint(iqmp) + mpint(p) + mpint(qq)), also={SUCCESS})
    case("rsa: a zero modulus", add(string("ssh-rsa") + mpint(0) + mpint(e) + mpint(dd) + mpint(iqmp) + mpint(p) + mpint(qq)))
    case("rsa: no q", add(string("ssh-rsa") + mpint(n) + mpint(e) + mpint(dd) + mpint(iqmp) + mpint(p)))
    case("rsa: a 2 GiB mpint length", add(string("ssh-rsa") + u32(0x7FFFFFFF) + b"\x01" * 64))
    # A consistent key with a wrong factor or exponent: OpenSSH's agent accepts what it cannot
    # sign with; either answer is fine, a crash or a hang is not.
    case("rsa: p*q is not n", add(rsa_key(n, e, dd, iqmp, p, qq + 2)), also={SUCCESS})
    case("rsa: an even public exponent", add(rsa_key(n, 65536, dd, iqmp, p, qq)), also={SUCCESS})
    # Constraints.
    case("a constraint of unknown type", frame(bytes([ADD_ID_CONSTRAINED]) + good_ed + string("c") + b"\x63"))
    case("a lifetime cut short", frame(bytes([ADD_ID_CONSTRAINED]) + good_ed + string("c") + b"\x01\x00\x00"))
    case("an extension constraint with garbage", frame(bytes([ADD_ID_CONSTRAINED]) + good_ed + string("c") + b"\xff" + string("restrict-destination-v00@openssh.com") + string(rng.randbytes(40))))
    case("an unknown extension constraint", frame(bytes([ADD_ID_CONSTRAINED]) + good_ed + string("c") + b"\xff" + string("nonsense@example.org") + string(b"")))
    # Signing, removing, smart cards, extensions.
    case("sign with a key the agent does not hold", frame(bytes([SIGN_REQUEST]) + string(string("ssh-ed25519") + string(pk)) + string(b"data") + u32(0)))
    case("sign with a garbage key blob", frame(bytes([SIGN_REQUEST]) + string(rng.randbytes(50)) + string(b"data") + u32(0)))
    case("sign with no data", frame(bytes([SIGN_REQUEST]) + string(string("ssh-ed25519") + string(pk))))
    case("remove a garbage key blob", frame(bytes([REMOVE_IDENTITY]) + string(rng.randbytes(40))))
    case("remove a key the agent does not hold", frame(bytes([REMOVE_IDENTITY]) + string(string("ssh-ed25519") + string(pk))))
    case("a smart card in a provider that does not exist", frame(bytes([ADD_SMARTCARD_KEY]) + string("/nonexistent/pkcs11.so") + string("")))
    case("an unknown extension", frame(bytes([EXTENSION]) + string("nonsense@example.org") + rng.randbytes(20)), also={EXTENSION_FAILURE})
    case("session-bind with garbage", frame(bytes([EXTENSION]) + string("session-bind@openssh.com") + rng.randbytes(60)), also={EXTENSION_FAILURE})
    case("session-bind with a bad signature", frame(bytes([EXTENSION]) + string("session-bind@openssh.com") + string(string("ssh-ed25519") + string(pk)) + string(rng.randbytes(32)) + string(string("ssh-ed25519") + string(rng.randbytes(64))) + b"\x00"), also={EXTENSION_FAILURE})
    case("an extension with no name", frame(bytes([EXTENSION])), also={EXTENSION_FAILURE})
    return cases, good_ed


# --- the random run ----------------------------------------------------------------------------

# Types the random run leaves out: a random LOCK would lock the agent for the rest of the run
# (its own case covers it) and smart cards start a helper process per message.
LEFT_OUT = {LOCK, UNLOCK, ADD_SMARTCARD_KEY, ADD_SMARTCARD_KEY_CONSTRAINED}


def random_message(rng, valid_adds):
    """(description, bytes, answers allowed besides FAILURE and CLOSED)."""
    kind = rng.randrange(4)
    if kind == 0:
        t = rng.choice([x for x in range(256) if x not in LEFT_OUT])
        body = bytes([t]) + rng.randbytes(rng.choice([0, 1, 4, 9, 33, 100, 700]))
        also = {IDENTITIES_ANSWER} if t == REQUEST_IDENTITIES else {SUCCESS} if t in (REMOVE_ALL, SSH1_REMOVE_ALL) else {EXTENSION_FAILURE} if t == EXTENSION else set()
        return f"type {t} with random bytes", frame(body), also
    message = rng.choice(valid_adds)
    if kind == 1:
        cut = rng.randrange(1, len(message) - 1)
        return f"an add cut at {cut}", frame(message[:cut]), set()
    if kind == 2:
        flipped = bytearray(message)
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(flipped))
            flipped[i] ^= 1 << rng.randrange(8)
        # A flip in a private field or the comment may still make a key OpenSSH accepts.
        return "an add with flipped bits", frame(bytes(flipped)), {SUCCESS}
    # A length field replaced by a large or off-by-one value.
    spot = rng.randrange(1, len(message) - 4)
    value = rng.choice([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, len(message), len(message) + 1, 256 * 1024 + 1])
    patched = message[:spot] + u32(value) + message[spot + 4:]
    return "an add with a patched length", frame(patched), {SUCCESS}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def alive(path, pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise AssertionError("the agent is gone")
    answer = exchange(path, frame(bytes([REQUEST_IDENTITIES])))
    if answer != IDENTITIES_ANSWER:
        raise AssertionError(f"a fresh connection's REQUEST_IDENTITIES answered {answer}")


def fuzz(path, pid, count):
    rng = random.Random(46)
    cases, good_ed = hostile_cases(rng)
    valid_adds = [bytes([ADD_IDENTITY]) + good_ed + string("fuzz-ed25519")]
    for bits in (256, 384, 521):
        name, curve, q, d = ecdsa_key(bits)
        valid_adds.append(bytes([ADD_IDENTITY]) + string(name) + string(curve) + string(q) + mpint(d) + string(f"fuzz-{bits}"))
    valid_adds.append(bytes([ADD_IDENTITY]) + rsa_key(*rsa_fields(2048)) + string("fuzz-rsa"))
    for message in valid_adds:
        # The seeds of the random run are keys the agent takes: the agent under test must, too.
        answer = exchange(path, frame(message))
        if answer != SUCCESS:
            raise AssertionError(f"a valid key ({message[5:30]!r}) was refused: {answer}")
    exchange(path, frame(bytes([REMOVE_ALL])))
    alive(path, pid)
    start_rss = rss_kib(pid)
    bad = []
    for name, data, also, shut in cases:
        try:
            answer = exchange(path, data, shut)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}")
        if answer not in {FAILURE, CLOSED} | also:
            bad.append(f"{name}: answered {answer}")
        alive(path, pid)
    print(f"{len(cases)} hostile messages: {len(cases) - len(bad)} answered failure or closed")
    deadline = time.monotonic() + 60
    sent = 0
    peak = start_rss
    while sent < count and time.monotonic() < deadline:
        name, data, also = random_message(rng, valid_adds)
        try:
            answer = exchange(path, data)
        except AssertionError as error:
            raise AssertionError(f"random #{sent} ({name}): {error}")
        if answer not in {FAILURE, CLOSED} | also:
            bad.append(f"random #{sent} ({name}): answered {answer}")
        sent += 1
        if sent % 50 == 0:
            exchange(path, frame(bytes([REMOVE_ALL])))
            peak = max(peak, rss_kib(pid))
        alive(path, pid)
    exchange(path, frame(bytes([REMOVE_ALL])))
    end_rss = rss_kib(pid)
    peak = max(peak, end_rss)
    print(f"{sent} random messages (seed 46); RSS {start_rss} KiB before, {end_rss} KiB after, {peak} KiB at most")
    if sent < min(count, 500):
        bad.append(f"only {sent} random messages in the time allowed")
    if peak - start_rss > RSS_BOUND_KIB:
        bad.append(f"the agent grew by {peak - start_rss} KiB")
    for line in bad:
        print("FAIL:", line)
    return not bad


def refused(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(REPLY_TIMEOUT)
    try:
        s.connect(path)
    except OSError as error:
        print(f"the socket cannot be reached by uid {os.getuid()}: {error}; the case proves nothing")
        return False
    s.close()
    answer = exchange(path, frame(bytes([REQUEST_IDENTITIES])))
    if answer in (CLOSED, FAILURE):
        print(f"uid {os.getuid()}: refused ({'closed' if answer == CLOSED else 'failure'})")
        return True
    print(f"uid {os.getuid()}: the agent answered {answer}")
    return False


def main():
    if sys.argv[1] == "--refused":
        return 0 if refused(sys.argv[2]) else 1
    return 0 if fuzz(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])) else 1


if __name__ == "__main__":
    sys.exit(main())
