#!/usr/bin/env python3
"""A TPM that answers wrongly, for Tests/tpm: a man in the middle in front of a real swtpm.

    lying-tpm.py LISTEN_PORT UPSTREAM_PORT SEED [SECONDS [PROBABILITY [COMMAND_CODE]]]

Listens on LISTEN_PORT (TPM commands) and LISTEN_PORT+1 (swtpm's control channel) of 127.0.0.1.
Control commands go to the swtpm unchanged; every TPM command goes to the swtpm too, but its
response comes back damaged (each with PROBABILITY, default 1, so that later commands of a
sequence are reached too), in one of several ways chosen at random (seeded): bytes flipped, cut
short, grown, its size or response code changed, or replaced by random bytes. tpm2-tss and the
keychain above it must turn each into an error: never a crash, a hang, or a key.
Given COMMAND_CODE (0x15d: TPM2_Sign), only that command's responses are damaged, each by one bit
flipped past the header: an answer that still parses, with a value changed (a signature's r or s).
Exits after SECONDS (default 300)."""
import os, random, select, socket, struct, sys, time

listen_port, upstream_port, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
lifetime = float(sys.argv[4]) if len(sys.argv) > 4 else 300
probability = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0
only = int(sys.argv[6], 16) if len(sys.argv) > 6 else None
rng = random.Random(seed)
end = time.time() + lifetime

def damage(response):
    kind = rng.randrange(7)
    r = bytearray(response)
    if kind == 0 and r:
        for _ in range(rng.randrange(1, 8)):
            r[rng.randrange(len(r))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        r = r[:rng.randrange(0, max(1, len(r)))]
    elif kind == 2:
        r += os.urandom(rng.randrange(1, 300))
    elif kind == 3 and len(r) >= 6:
        r[2:6] = struct.pack(">I", rng.choice([0, 1, 9, len(r) + 1, len(r) + 1000, 0xFFFFFFFF, rng.randrange(1 << 32)]))
    elif kind == 4 and len(r) >= 10:
        r[6:10] = struct.pack(">I", rng.choice([0x98E, 0x921, 0x9F, 0x902, 0x101, rng.randrange(1 << 32)]))
    elif kind == 5:
        r = bytearray(os.urandom(rng.randrange(0, 600)))
    else:
        # Shaped like a success with a body of random bytes of a plausible length.
        body = os.urandom(rng.randrange(0, 400))
        r = bytearray(struct.pack(">HII", rng.choice([0x8001, 0x8002]), 10 + len(body), 0) + body)
    return bytes(r)

def flip_one_bit(response):
    r = bytearray(response)
    if len(r) > 10:
        r[rng.randrange(10, len(r))] ^= 1 << rng.randrange(8)
    return bytes(r)

def read_response(s):
    """One TPM response from the swtpm: a 10-byte header, then the rest of its size."""
    data = b""
    while len(data) < 6:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
    size = struct.unpack(">I", data[2:6])[0]
    while len(data) < size:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data

listeners = {}
for port, target in ((listen_port, upstream_port), (listen_port + 1, upstream_port + 1)):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    listeners[s] = target
pairs = {}  # client socket -> (upstream socket, is the command channel)
while time.time() < end:
    ready, _, _ = select.select(list(listeners) + list(pairs), [], [], 0.5)
    for s in ready:
        if s in listeners:
            client, _ = s.accept()
            upstream = socket.create_connection(("127.0.0.1", listeners[s]))
            pairs[client] = (upstream, listeners[s] == upstream_port)
            continue
        upstream, command = pairs[s]
        try:
            data = s.recv(65536)
            if not data:
                raise OSError
            upstream.sendall(data)
            if command:
                response = read_response(upstream)
                if only is None:
                    s.sendall(damage(response) if rng.random() < probability else response)
                else:
                    code = struct.unpack(">I", data[6:10])[0] if len(data) >= 10 else None
                    s.sendall(flip_one_bit(response) if code == only and rng.random() < probability else response)
            else:
                s.sendall(upstream.recv(65536))
        except OSError:
            pairs.pop(s, None)
            s.close()
            upstream.close()
