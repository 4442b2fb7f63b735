#!/usr/bin/env python3
"""A TPM that accepts connections and never answers: silent-tpm.py PORT SECONDS listens on
127.0.0.1:PORT and PORT+1 (swtpm's TCTI opens both) and holds every connection until SECONDS
have passed, then exits."""
import select
import socket
import sys
import time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
servers = []
for p in (port, port + 1):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", p))
    server.listen(16)
    servers.append(server)
held, end = [], time.time() + seconds
while time.time() < end:
    for server in select.select(servers, [], [], 1)[0]:
        held.append(server.accept()[0])
