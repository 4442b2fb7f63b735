#!/usr/bin/env python3
"""Writes a tiny OCI image layout (one layer holding one file) to DIR, tagged `latest`."""
import gzip, hashlib, io, json, os, sys, tarfile

out = sys.argv[1]
os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)

def blob(data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(out, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return {"digest": "sha256:" + digest, "size": len(data)}

raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w") as tar:
    content = b"hello from the keychain test\n"
    info = tarfile.TarInfo("hello.txt")
    info.size = len(content)
    info.mtime = 0
    tar.addfile(info, io.BytesIO(content))
layer_tar = raw.getvalue()
layer = blob(gzip.compress(layer_tar, mtime=0))
layer["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
config = blob(json.dumps({
    "architecture": "amd64", "os": "linux", "config": {},
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]},
}).encode())
config["mediaType"] = "application/vnd.oci.image.config.v1+json"
manifest = blob(json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": config, "layers": [layer],
}).encode())
manifest["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
manifest["annotations"] = {"org.opencontainers.image.ref.name": "latest"}
with open(os.path.join(out, "index.json"), "w") as f:
    json.dump({"schemaVersion": 2, "manifests": [manifest]}, f)
with open(os.path.join(out, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
