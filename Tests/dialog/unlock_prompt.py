#!/usr/bin/python3
"""Unlocks the Secret Service's login collection the way a client does: Unlock, then the prompt it
returns, on one connection (a prompt is its caller's), waiting for Completed (30 s at most).
Prints "prompt PATH" and then "completed dismissed=BOOL", or "no completion".
"""
from jeepney import DBusAddress, MatchRule, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

conn = open_dbus_connection(bus='SESSION')
service = DBusAddress('/org/freedesktop/secrets', bus_name='org.freedesktop.secrets',
                      interface='org.freedesktop.Secret.Service')
_, prompt = conn.send_and_get_reply(
    new_method_call(service, 'Unlock', 'ao', (['/org/freedesktop/secrets/collection/login'],))).body
print('prompt', prompt, flush=True)
rule = MatchRule(type='signal', interface='org.freedesktop.Secret.Prompt', member='Completed', path=prompt)
conn.send_and_get_reply(message_bus.AddMatch(rule))
conn.send_and_get_reply(new_method_call(
    DBusAddress(prompt, bus_name='org.freedesktop.secrets', interface='org.freedesktop.Secret.Prompt'), 'Prompt', 's', ('',)))
try:
    while True:
        message = conn.receive(timeout=30)
        if rule.matches(message):
            print('completed dismissed=%s' % message.body[0])
            break
except TimeoutError:
    print('no completion')
