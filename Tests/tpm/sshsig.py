#!/usr/bin/env python3
"""An SSH signature (ssh-keygen -Y sign's format, PROTOCOL.sshsig) around a TPM key's ECDSA
signature, so that OpenSSH's own ssh-keygen -Y verify judges it: written here from the format,
independently of the agent's code.

  sshsig.py digest NAMESPACE MESSAGE          the SHA-256 to have the key sign (hex)
  sshsig.py write POINT R S NAMESPACE OUT     OUT.sig (armoured) and OUT.pub (authorized_keys line)
"""
import base64
import hashlib
import struct
import sys


def string(b):
    return struct.pack(">I", len(b)) + b


def mpint(magnitude):
    v = magnitude.lstrip(b"\0")
    return string(b"\0" + v if v and v[0] & 0x80 else v)


def signed_data(namespace, message):
    return b"SSHSIG" + string(namespace) + string(b"") + string(b"sha512") + string(hashlib.sha512(message).digest())


if sys.argv[1] == "digest":
    with open(sys.argv[3], "rb") as f:
        print(hashlib.sha256(signed_data(sys.argv[2].encode(), f.read())).hexdigest())
else:
    point, r, s = (bytes.fromhex(x) for x in sys.argv[2:5])
    namespace, out = sys.argv[5].encode(), sys.argv[6]
    public = string(b"ecdsa-sha2-nistp256") + string(b"nistp256") + string(point)
    signature = string(b"ecdsa-sha2-nistp256") + string(mpint(r) + mpint(s))
    blob = b"SSHSIG" + struct.pack(">I", 1) + string(public) + string(namespace) + string(b"") + string(b"sha512") + string(signature)
    text = base64.b64encode(blob).decode()
    with open(out + ".sig", "w") as f:
        f.write("-----BEGIN SSH SIGNATURE-----\n" + "\n".join(text[i:i + 70] for i in range(0, len(text), 70)) + "\n-----END SSH SIGNATURE-----\n")
    with open(out + ".pub", "w") as f:
        f.write("ecdsa-sha2-nistp256 " + base64.b64encode(public).decode() + " tpm-key\n")
