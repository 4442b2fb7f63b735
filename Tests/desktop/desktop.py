#!/usr/bin/python3
"""Secret Service and portal client for Tests/desktop (python3-secretstorage, python3-dbus).

  desktop.py fill
      Under gnome-keyring-daemon: items in the login collection (a binary secret, an app token
      with awkward characters) and a "Work" collection made with the password work-pw (through
      gnome-keyring's CreateWithMasterPassword, no prompt) holding one item.
  desktop.py dump NAME
      The items of /org/freedesktop/secrets/collection/NAME as one JSON line each, sorted (label,
      attributes, secret in hex, created, modified), leaving out what the provider lists but does
      not serve (gnome-keyring's portal keys). Equal under gnome-keyring and, after the import,
      under keychain-secret-service.
  desktop.py portal APP_ID
      xdg-desktop-portal's call to the Secret backend (org.freedesktop.impl.portal.Secret at
      /org/freedesktop/portal/desktop of org.freedesktop.secrets): RetrieveSecret with a pipe;
      prints the response code and what was written to the pipe, in hex. An error: its name.
  desktop.py portal-app
      What a Flatpak app's libsecret does: org.freedesktop.portal.Secret.RetrieveSecret through
      xdg-desktop-portal (org.freedesktop.portal.Desktop), waiting for the request's Response;
      prints the response code and the secret, in hex, as `portal` does. An error: its name.
  desktop.py store LABEL KEY=VALUE SECRET
      SecretStorage's create_item in the default collection (python3 is then the client).
  desktop.py read KEY=VALUE
      The secret of the item those attributes find, through SecretStorage's get_secret; an error:
      its D-Bus name on stderr, exit 1.
  desktop.py dbus-read item|service KEY=VALUE...
      What a program speaking the API itself through dbus-python does (no SecretStorage):
      OpenSession "plain", SearchItems for each pair, Unlock if an item is locked, then the
      secrets of the first item each finds, one a line: through each item's GetSecret, or the
      service's GetSecrets for all of them at once. An error: its D-Bus name on stderr, exit 1;
      a GetSecrets that leaves an item out fails the same way.
"""
import json
import os
import sys


def fill():
    import secretstorage
    from jeepney import DBusAddress, new_method_call
    conn = secretstorage.dbus_init()
    service = DBusAddress('/org/freedesktop/secrets', bus_name='org.freedesktop.secrets',
                          interface='org.freedesktop.Secret.Service')
    internal = DBusAddress('/org/freedesktop/secrets', bus_name='org.freedesktop.secrets',
                           interface='org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface')
    session = conn.send_and_get_reply(new_method_call(service, 'OpenSession', 'sv', ('plain', ('s', '')))).body[1]
    login = secretstorage.Collection(conn, '/org/freedesktop/secrets/collection/login')
    login.create_item('Mail password', {'service': 'mail.example', 'account': 'ann@example'}, b'\x00\xffbin\x80')
    login.create_item('My app token', {'app': 'myapp', 'key': 'token', 'note': ' spaced = "quoted" \\ '}, b'tok-123',
                      content_type='application/octet-stream')
    reply = conn.send_and_get_reply(new_method_call(
        internal, 'CreateWithMasterPassword', 'a{sv}(oayays)',
        ({'org.freedesktop.Secret.Collection.Label': ('s', 'Work')}, (session, b'', b'work-pw', 'text/plain'))))
    work = secretstorage.Collection(conn, reply.body[0])
    work.create_item('VPN', {'service': 'vpn.example', 'account': 'ann'}, b'vpn-pw')


def dump(name):
    import secretstorage
    from secretstorage.exceptions import ItemNotFoundException
    from secretstorage.item import Item
    conn = secretstorage.dbus_init()
    collection = secretstorage.Collection(conn, f'/org/freedesktop/secrets/collection/{name}')
    lines = []
    for path in collection._collection.get_property('Items'):
        try:
            item = Item(conn, path)
        except ItemNotFoundException:
            continue
        lines.append(json.dumps({
            'label': item.get_label(),
            'attributes': dict(sorted(item.get_attributes().items())),
            'secret': item.get_secret().hex(),
            'created': item.get_created(),
            'modified': item.get_modified(),
        }, sort_keys=True))
    for line in sorted(lines):
        print(line)


def portal(app_id):
    import dbus
    bus = dbus.SessionBus()
    backend = dbus.Interface(bus.get_object('org.freedesktop.secrets', '/org/freedesktop/portal/desktop', introspect=False),
                             'org.freedesktop.impl.portal.Secret')
    read_end, write_end = os.pipe()
    try:
        response, _ = backend.RetrieveSecret(dbus.ObjectPath('/org/freedesktop/portal/desktop/request/1_1/test'), app_id,
                                             dbus.types.UnixFd(write_end), dbus.Dictionary({}, signature='sv'),
                                             signature='osha{sv}', timeout=60)
    except dbus.DBusException as error:
        print('error', error.get_dbus_name())
        sys.exit(1)
    os.close(write_end)
    data = b''
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        data += chunk
    print(int(response), data.hex())


def portal_app():
    import dbus
    from dbus.mainloop.glib import DBusGMainLoop
    from gi.repository import GLib
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    # The request's path is known before the call (the portal API's handle_token), so the
    # Response cannot arrive before the match for it is in place.
    token = 'keychain_test'
    sender = bus.get_unique_name()[1:].replace('.', '_')
    request = f'/org/freedesktop/portal/desktop/request/{sender}/{token}'
    loop = GLib.MainLoop()
    outcome = {}

    def on_response(code, results):
        outcome['code'] = int(code)
        loop.quit()
    bus.add_signal_receiver(on_response, 'Response', 'org.freedesktop.portal.Request', 'org.freedesktop.portal.Desktop', request)
    portal = dbus.Interface(bus.get_object('org.freedesktop.portal.Desktop', '/org/freedesktop/portal/desktop'),
                            'org.freedesktop.portal.Secret')
    read_end, write_end = os.pipe()
    try:
        portal.RetrieveSecret(dbus.types.UnixFd(write_end), dbus.Dictionary({'handle_token': token}, signature='sv'), timeout=60)
    except dbus.DBusException as error:
        print('error', error.get_dbus_name())
        sys.exit(1)
    os.close(write_end)
    GLib.timeout_add_seconds(60, loop.quit)
    loop.run()
    if 'code' not in outcome:
        print('error no Response')
        sys.exit(1)
    data = b''
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        data += chunk
    print(outcome['code'], data.hex())


def store(label, pair, secret):
    import secretstorage
    key, value = pair.split('=', 1)
    secretstorage.get_default_collection(secretstorage.dbus_init()).create_item(label, {key: value}, secret.encode())


def read(pair):
    import secretstorage
    key, value = pair.split('=', 1)
    items = list(secretstorage.get_default_collection(secretstorage.dbus_init()).search_items({key: value}))
    try:
        print(items[0].get_secret().decode())
    except secretstorage.exceptions.SecretServiceNotAvailableException as error:
        sys.exit(f'error: {error}')
    except Exception as error:
        sys.exit(f'error: {type(error).__name__}: {error}')


def dbus_read(method, pairs):
    import dbus
    bus = dbus.SessionBus()
    service = dbus.Interface(bus.get_object('org.freedesktop.secrets', '/org/freedesktop/secrets', introspect=False),
                             'org.freedesktop.Secret.Service')
    try:
        _, session = service.OpenSession('plain', dbus.String('', variant_level=1), signature='sv')
        paths = []
        for pair in pairs:
            key, value = pair.split('=', 1)
            unlocked, locked = service.SearchItems(dbus.Dictionary({key: value}, signature='ss'), signature='a{ss}')
            if locked:
                _, prompt = service.Unlock(locked, signature='ao')
                if prompt != '/':
                    sys.exit(f'error: {pair}: the item is locked and unlocking it needs a prompt')
            paths.append((list(unlocked) + list(locked))[0])
        # Long enough for the broker's question: dbus-python's default is 25 s.
        if method == 'item':
            secrets = {path: dbus.Interface(bus.get_object('org.freedesktop.secrets', path, introspect=False),
                                            'org.freedesktop.Secret.Item').GetSecret(session, signature='o', timeout=60)
                       for path in paths}
        else:
            secrets = service.GetSecrets(paths, session, signature='aoo', timeout=60)
    except dbus.DBusException as error:
        sys.exit(f'error: {error.get_dbus_name()}')
    for path in paths:
        if path not in secrets:
            sys.exit(f'error: GetSecrets left {path} out')
        print(bytes(secrets[path][2]).decode())


if __name__ == '__main__':
    if sys.argv[1] == 'store':
        store(*sys.argv[2:5])
    elif sys.argv[1] == 'read':
        read(sys.argv[2])
    elif sys.argv[1] == 'dbus-read':
        dbus_read(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == 'fill':
        fill()
    elif sys.argv[1] == 'dump':
        dump(sys.argv[2])
    elif sys.argv[1] == 'portal':
        portal(sys.argv[2])
    elif sys.argv[1] == 'portal-app':
        portal_app()
    else:
        sys.exit(f'unknown command {sys.argv[1]}')
