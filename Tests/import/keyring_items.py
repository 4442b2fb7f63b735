#!/usr/bin/python3
"""Secret Service client for Tests/import, over python3-secretstorage (jeepney underneath).

  keyring_items.py fill
      Under gnome-keyring-daemon: items in the login collection (a generic password with a
      binary secret, an app token with awkward characters), a "Work" collection made with a
      password and made the default alias, a "Plain" one with an empty password (which
      gnome-keyring writes in its plain-text format). Collections are made with gnome-keyring's
      own CreateWithMasterPassword, which takes the password without a prompt.
  keyring_items.py unlock NAME PASSWORD
      gnome-keyring's UnlockWithMasterPassword of collection NAME (no prompt).
  keyring_items.py label NAME
      The label of collection NAME.
  keyring_items.py dump NAME
      The items of /org/freedesktop/secrets/collection/NAME as one JSON line each, sorted:
      label, attributes, secret (hex), created, modified. Run under gnome-keyring before the
      import and under keychain-secret-service after it, the two dumps must be equal.
"""
import json
import sys

import secretstorage
from jeepney import DBusAddress, new_method_call

SERVICE = DBusAddress('/org/freedesktop/secrets', bus_name='org.freedesktop.secrets',
                      interface='org.freedesktop.Secret.Service')
INTERNAL = DBusAddress('/org/freedesktop/secrets', bus_name='org.freedesktop.secrets',
                       interface='org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface')


def call(conn, address, method, signature, body):
    reply = conn.send_and_get_reply(new_method_call(address, method, signature, body))
    if reply.header.message_type.name == 'error':
        raise SystemExit(f'{method}: {reply.header.fields} {reply.body}')
    return reply.body


def create(conn, session, label, password):
    path = call(conn, INTERNAL, 'CreateWithMasterPassword', 'a{sv}(oayays)',
                ({'org.freedesktop.Secret.Collection.Label': ('s', label)}, (session, b'', password, 'text/plain')))[0]
    return secretstorage.Collection(conn, path)


def fill():
    conn = secretstorage.dbus_init()
    session = call(conn, SERVICE, 'OpenSession', 'sv', ('plain', ('s', '')))[1]
    login = secretstorage.Collection(conn, '/org/freedesktop/secrets/collection/login')
    login.create_item('Mail password', {'service': 'mail.example', 'account': 'ann@example'}, b'\x00\xffbin\x80')
    login.create_item('My app token', {'app': 'myapp', 'key': 'token', 'note': ' spaced = "quoted" \\ '}, b'tok-123')
    work = create(conn, session, 'Work', b'work-pw')
    work.create_item('VPN', {'service': 'vpn.example', 'account': 'ann'}, b'vpn-pw')
    call(conn, SERVICE, 'SetAlias', 'so', ('default', work.collection_path))
    plain = create(conn, session, 'Plain', b'')
    plain.create_item('Plain item', {'app': 'plain'}, b'plain-secret')


def unlock(name, password):
    """gnome-keyring's own unlock with a password, no prompt (UnlockWithMasterPassword)."""
    conn = secretstorage.dbus_init()
    session = call(conn, SERVICE, 'OpenSession', 'sv', ('plain', ('s', '')))[1]
    call(conn, INTERNAL, 'UnlockWithMasterPassword', 'o(oayays)',
         (f'/org/freedesktop/secrets/collection/{name}', (session, b'', password.encode(), 'text/plain')))


def dump(name):
    conn = secretstorage.dbus_init()
    collection = secretstorage.Collection(conn, f'/org/freedesktop/secrets/collection/{name}')
    lines = []
    for item in collection.get_all_items():
        lines.append(json.dumps({
            'label': item.get_label(),
            'attributes': dict(sorted(item.get_attributes().items())),
            'secret': item.get_secret().hex(),
            'created': item.get_created(),
            'modified': item.get_modified(),
        }, sort_keys=True))
    for line in sorted(lines):
        print(line)


if __name__ == '__main__':
    if sys.argv[1] == 'fill':
        fill()
    elif sys.argv[1] == 'label':
        print(secretstorage.Collection(secretstorage.dbus_init(), f'/org/freedesktop/secrets/collection/{sys.argv[2]}').get_label())
    elif sys.argv[1] == 'unlock':
        unlock(sys.argv[2], sys.argv[3])
    else:
        dump(sys.argv[2])
