#!/usr/bin/python3
"""Secret Service client cases for Tests/secret-service/run.sh, through Debian's SecretStorage
(jeepney underneath) and, for what SecretStorage does not send, jeepney messages made by hand.
Each subcommand exits non-zero with a message when the service does not behave as the spec says."""
import os
import re
import sys

import secretstorage
from jeepney import DBusAddress, DBusErrorResponse, MessageType, Properties, new_method_call
from jeepney.io.blocking import open_dbus_connection
from secretstorage.dhcrypto import Session
from secretstorage.util import BUS_NAME, SS_PATH, DBusAddressWrapper, format_secret, open_session

SERVICE = 'org.freedesktop.Secret.Service'
DEFAULT = '/org/freedesktop/secrets/aliases/default'


def fail(message):
    print('FAILED:', message, file=sys.stderr)
    sys.exit(1)


def expect(wanted, got, what):
    if wanted != got:
        fail(f'{what}: expected {wanted!r}, got {got!r}')


def plain_session(connection):
    """A session with the `plain` algorithm, which SecretStorage only uses when DH is refused."""
    service = DBusAddressWrapper(SS_PATH, SERVICE, connection)
    output, path = service.call('OpenSession', 'sv', 'plain', ('s', ''))
    expect(('s', ''), output, 'plain OpenSession output')
    session = Session()
    session.object_path = path
    session.encrypted = False
    return session


def call(connection, path, interface, method, signature='', *body):
    """A raw call; returns ('ok', body) or ('error', name)."""
    message = new_method_call(DBusAddress(path, BUS_NAME, interface), method, signature, body)
    reply = connection.send_and_get_reply(message)
    if reply.header.message_type == MessageType.error:
        return 'error', reply.header.fields[4]  # HeaderFields.error_name
    return 'ok', reply.body


def expect_error(name, result, what):
    if result[0] != 'error' or result[1] != name:
        fail(f'{what}: expected error {name}, got {result!r}')


def roundtrip(mode):
    """Create, search, get, set, relabel, reattribute, delete, in a plain or a DH session."""
    connection = secretstorage.dbus_init()
    session = plain_session(connection) if mode == 'plain' else open_session(connection)
    expect(mode == 'dh', session.encrypted, 'session kind')
    collection = secretstorage.get_default_collection(connection, session)
    expect(False, collection.is_locked(), 'default collection locked')
    attributes = {'application': 'client.py', 'mode': mode}
    item = collection.create_item('first label', attributes, b'secret one', content_type='text/plain')
    expect(b'secret one', item.get_secret(), 'secret after create')
    expect('text/plain', item.get_secret_content_type(), 'content type')
    expect(attributes, item.get_attributes(), 'attributes after create')
    expect('first label', item.get_label(), 'label after create')
    found = list(collection.search_items({'mode': mode}))
    expect([item.item_path], [i.item_path for i in found], 'collection search')
    found = list(secretstorage.search_items(connection, {'application': 'client.py', 'mode': mode}))
    expect([item.item_path], [i.item_path for i in found], 'service search')
    expect([], list(collection.search_items({'mode': mode, 'application': 'other'})), 'search on all pairs')
    # Binary secrets of every length around the AES block size survive both session kinds.
    for length in (0, 1, 15, 16, 17, 1000):
        value = os.urandom(length)
        item.set_secret(value, content_type='application/octet-stream')
        expect(value, item.get_secret(), f'secret of {length} bytes')
    expect('application/octet-stream', item.get_secret_content_type(), 'content type after set')
    item.set_label('second label')
    expect('second label', item.get_label(), 'label after set')
    item.set_attributes({'application': 'client.py', 'mode': mode, 'extra': 'yes'})
    expect([item.item_path], [i.item_path for i in collection.search_items({'extra': 'yes'})], 'search after set_attributes')
    if item.get_created() <= 0 or item.get_modified() < item.get_created():
        fail('created/modified')
    replaced = collection.create_item('third', {'application': 'client.py', 'mode': mode, 'extra': 'yes'}, b'replaced', replace=True)
    expect([replaced.item_path], [i.item_path for i in collection.search_items({'extra': 'yes'})], 'replace=True replaces')
    expect(b'replaced', replaced.get_secret(), 'replaced secret')
    assert replaced.item_path in [i.item_path for i in collection.get_all_items()]
    replaced.delete()
    expect([], list(collection.search_items({'mode': mode})), 'search after delete')
    try:
        replaced.delete()
        fail('a second delete succeeded')
    except secretstorage.ItemNotFoundException:
        pass
    print('ok')


def store(label, secret, *pairs):
    connection = secretstorage.dbus_init()
    collection = secretstorage.get_default_collection(connection)
    attributes = dict(zip(pairs[::2], pairs[1::2]))
    collection.create_item(label, attributes, secret.encode(), replace=True)


def lookup(*pairs):
    connection = secretstorage.dbus_init()
    attributes = dict(zip(pairs[::2], pairs[1::2]))
    items = list(secretstorage.search_items(connection, attributes))
    if not items:
        sys.exit(1)
    print(items[0].get_secret().decode())


def get_secret_locked(*pairs):
    """GetSecret on a locked item: IsLocked; the item shows as locked."""
    connection = secretstorage.dbus_init()
    attributes = dict(zip(pairs[::2], pairs[1::2]))
    unlocked, locked = DBusAddressWrapper(SS_PATH, SERVICE, connection).call('SearchItems', 'a{ss}', attributes)
    expect([], unlocked, 'unlocked results while locked')
    if len(locked) != 1:
        fail(f'locked results: {locked!r}')
    session = open_session(connection)
    result = call(connection, locked[0], 'org.freedesktop.Secret.Item', 'GetSecret', 'o', session.object_path)
    expect_error('org.freedesktop.Secret.Error.IsLocked', result, 'GetSecret while locked')
    collection = secretstorage.get_default_collection(connection)
    expect(True, collection.is_locked(), 'collection Locked')
    item = secretstorage.Item(connection, locked[0])
    expect(True, item.is_locked(), 'item Locked')
    secrets = DBusAddressWrapper(SS_PATH, SERVICE, connection).call('GetSecrets', 'aoo', locked, session.object_path)
    expect(({},), (secrets[0],), 'GetSecrets leaves locked items out')
    print('ok')


def unlock(expected):
    """Unlock the default collection through its prompt; `expected` is 'unlocked' or 'dismissed'."""
    connection = secretstorage.dbus_init()
    collection = secretstorage.get_default_collection(connection)
    dismissed = collection.unlock()
    expect(expected == 'dismissed', dismissed, 'prompt dismissed')
    expect(expected == 'dismissed', collection.is_locked(), 'Locked after the prompt')
    print('ok')


def dismiss():
    """Unlock returns a prompt; Dismiss on it completes with dismissed=true."""
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy
    connection = secretstorage.dbus_init()
    unlocked, prompt = DBusAddressWrapper(SS_PATH, SERVICE, connection).call('Unlock', 'ao', [DEFAULT])
    expect([], unlocked, 'nothing unlocked yet')
    if prompt == '/':
        fail('no prompt for a locked collection')
    rule = MatchRule(path=prompt, interface='org.freedesktop.Secret.Prompt', member='Completed')
    Proxy(message_bus, connection).AddMatch(rule)
    with connection.filter(rule) as signals:
        expect('ok', call(connection, prompt, 'org.freedesktop.Secret.Prompt', 'Dismiss')[0], 'Dismiss')
        signal = connection.recv_until_filtered(signals, timeout=10)
    expect(True, signal.body[0], 'Completed dismissed')
    expect_error('org.freedesktop.Secret.Error.NoSuchObject',
                 call(connection, prompt, 'org.freedesktop.Secret.Prompt', 'Dismiss'), 'a completed prompt is gone')
    print('ok')


def malformed():
    """Bad calls get the spec's and D-Bus's errors; the service keeps serving."""
    connection = secretstorage.dbus_init()
    service = (SS_PATH, SERVICE)
    expect_error('org.freedesktop.DBus.Error.InvalidArgs', call(connection, *service, 'SearchItems', 's', 'x'), 'wrong signature')
    expect_error('org.freedesktop.DBus.Error.InvalidArgs', call(connection, *service, 'OpenSession', 's', 'plain'), 'missing argument')
    expect_error('org.freedesktop.DBus.Error.NotSupported',
                 call(connection, *service, 'OpenSession', 'sv', 'rot13', ('s', '')), 'unknown algorithm')
    for key in (b'', b'\x00', b'\x01', b'\xff' * 128, b'\x01' * 200):
        expect_error('org.freedesktop.DBus.Error.InvalidArgs',
                     call(connection, *service, 'OpenSession', 'sv', 'dh-ietf1024-sha256-aes128-cbc-pkcs7', ('ay', key)),
                     f'DH public key {key[:4]!r}... of {len(key)} bytes')
    expect_error('org.freedesktop.DBus.Error.InvalidArgs',
                 call(connection, *service, 'OpenSession', 'sv', 'dh-ietf1024-sha256-aes128-cbc-pkcs7', ('s', 'x')), 'DH input type')
    # Objects that do not exist: the spec's NoSuchObject, which is what SecretStorage turns into
    # ItemNotFoundException, wherever the path (3.3, Debian 12's, takes UnknownObject for an error).
    for path, interface in (('/org/freedesktop/secrets/collection/nosuch', 'Collection'),
                            ('/org/freedesktop/secrets/collection/login/999999', 'Item'),
                            ('/org/freedesktop/secrets/collection/login/abc', 'Item'),
                            ('/org/freedesktop/secrets/collection/nosuch/1', 'Item'),
                            ('/org/freedesktop/secrets/collection/login/0', 'Item'),
                            ('/org/freedesktop/secrets/collection/login/1234567890123456789', 'Item'),
                            ('/org/freedesktop/secrets/collection/login/1x', 'Item'),
                            ('/org/freedesktop/secrets/aliases/nosuch', 'Collection')):
        result = call(connection, path, 'org.freedesktop.DBus.Properties', 'GetAll', 's', 'org.freedesktop.Secret.' + interface)
        expect_error('org.freedesktop.Secret.Error.NoSuchObject', result, f'unknown object {path}')
    expect_error('org.freedesktop.Secret.Error.NoSuchObject',
                 call(connection, '/org/freedesktop/secrets/collection/login/999999', 'org.freedesktop.Secret.Item', 'Delete'),
                 'Delete of a missing item')
    for path in ('/org/freedesktop/secrets/elsewhere', '/org/freedesktop/secrets/collection/login/1/2', '/not/existing/path'):
        expect_error('org.freedesktop.Secret.Error.NoSuchObject',
                     call(connection, path, 'org.freedesktop.Secret.Item', 'Delete'), f'outside the tree: {path}')
        expect_error('org.freedesktop.Secret.Error.NoSuchObject',
                     call(connection, path, 'org.freedesktop.DBus.Properties', 'Get', 'ss', 'org.freedesktop.Secret.Item', 'Label'),
                     f'a property outside the tree: {path}')
    # SecretStorage's own test_non_existing_item.
    try:
        secretstorage.Item(connection, '/not/existing/path').get_label()
        fail('an item at /not/existing/path has a label')
    except secretstorage.ItemNotFoundException:
        pass
    # What sd-bus answered before: the folders above the objects are introspectable and no
    # objects; a path that is nothing cannot be introspected.
    for path in ('/', '/org/freedesktop'):
        expect_error('org.freedesktop.DBus.Error.UnknownObject',
                     call(connection, path, 'org.freedesktop.DBus.Properties', 'GetAll', 's', 'org.freedesktop.Secret.Item'),
                     f'the folder {path} above the objects')
    if 'node name="secrets"' not in call(connection, '/org/freedesktop', 'org.freedesktop.DBus.Introspectable', 'Introspect')[1][0]:
        fail('/org/freedesktop does not list secrets')
    for path in ('/not/existing/path', '/org/freedesktop/secrets/collection/login/1/2'):
        expect_error('org.freedesktop.DBus.Error.UnknownObject',
                     call(connection, path, 'org.freedesktop.DBus.Introspectable', 'Introspect'), f'introspection of {path}')
    expect_error('org.freedesktop.Secret.Error.NoSession',
                 call(connection, '/org/freedesktop/secrets/session/s999', 'org.freedesktop.Secret.Session', 'Close'), 'Close of no session')
    expect_error('org.freedesktop.Secret.Error.NoSession',
                 call(connection, *service, 'GetSecrets', 'aoo', [], '/org/freedesktop/secrets/session/s999'), 'no such session')
    collection = secretstorage.get_default_collection(connection)
    bad_secret = ('/org/freedesktop/secrets/session/nope', b'', b'x', 'text/plain')
    expect_error('org.freedesktop.Secret.Error.NoSession',
                 call(connection, collection.collection_path, 'org.freedesktop.Secret.Collection', 'CreateItem',
                      'a{sv}(oayays)b', {}, bad_secret, False), 'CreateItem without a session')
    expect_error('org.freedesktop.DBus.Error.InvalidArgs',
                 call(connection, collection.collection_path, 'org.freedesktop.Secret.Collection', 'CreateItem',
                      'a{sv}(oayays)b', {'org.freedesktop.Secret.Item.Label': ('u', 1)}, bad_secret, False), 'label of the wrong type')
    # A DH session's secret that does not decrypt, or has no IV.
    dh = open_session(connection)
    for parameters, value in ((b'\x00' * 16, b'\x01' * 16), (b'', b'\x01' * 16), (b'\x00' * 16, b'\x01' * 5)):
        expect_error('org.freedesktop.DBus.Error.InvalidArgs',
                     call(connection, collection.collection_path, 'org.freedesktop.Secret.Collection', 'CreateItem',
                          'a{sv}(oayays)b', {}, (dh.object_path, parameters, value, 'text/plain'), False), 'undecryptable secret')
    # Another client's session is not this client's.
    other = secretstorage.dbus_init()
    theirs = open_session(other)
    expect_error('org.freedesktop.Secret.Error.NoSession',
                 call(connection, *service, 'GetSecrets', 'aoo', [], theirs.object_path), "another client's session")
    expect_error('org.freedesktop.DBus.Error.UnknownMethod', call(connection, *service, 'NoSuchMethod'), 'unknown method')
    expect_error('org.freedesktop.DBus.Error.PropertyReadOnly',
                 call(connection, collection.collection_path, 'org.freedesktop.DBus.Properties', 'Set', 'ssv',
                      'org.freedesktop.Secret.Collection', 'Locked', ('b', False)), 'read-only property')
    # Huge attributes: refused or stored, never a crash.
    huge = {'k' * 100000: 'v' * 1000000}
    try:
        item = collection.create_item('huge', huge, b'x')
        expect(huge, item.get_attributes(), 'huge attributes')
        item.delete()
    except DBusErrorResponse as error:
        print('huge attributes refused:', error.name)
    many = {f'key{i}': f'value{i}' for i in range(2000)}
    item = collection.create_item('many', many, b'x')
    expect([item.item_path], [i.item_path for i in collection.search_items({'key1999': 'value1999', 'key0': 'value0'})], '2,000 attributes')
    item.delete()
    # Still serving.
    expect(False, collection.is_locked(), 'service alive')
    print('ok')


def sessions(count):
    """Opens `count` sessions on one connection, then leaves without closing them."""
    connection = secretstorage.dbus_init()
    paths = {open_session(connection).object_path for _ in range(int(count))}
    expect(int(count), len(paths), 'distinct sessions')
    status, body = call(connection, '/org/freedesktop/secrets/session', 'org.freedesktop.DBus.Introspectable', 'Introspect')
    expect(int(count), body[0].count('<node name="'), 'sessions the service lists while they are open')
    print(len(paths))


def session_count():
    """How many sessions the service holds, from introspecting /org/freedesktop/secrets/session."""
    connection = secretstorage.dbus_init()
    status, body = call(connection, '/org/freedesktop/secrets/session', 'org.freedesktop.DBus.Introspectable', 'Introspect')
    if status != 'ok':
        print(0)
        return
    print(body[0].count('<node name="'))


def close_session():
    """Close removes the session; using it afterwards is NoSession."""
    connection = secretstorage.dbus_init()
    session = open_session(connection)
    expect('ok', call(connection, session.object_path, 'org.freedesktop.Secret.Session', 'Close')[0], 'Close')
    expect_error('org.freedesktop.Secret.Error.NoSession',
                 call(connection, SS_PATH, SERVICE, 'GetSecrets', 'aoo', [], session.object_path), 'closed session')
    print('ok')


def properties():
    """Service, collection and alias properties; Set on a writable one; Introspect lists objects."""
    connection = secretstorage.dbus_init()
    service = DBusAddressWrapper(SS_PATH, SERVICE, connection)
    collections = service.get_property('Collections')
    login = '/org/freedesktop/secrets/collection/login'
    if login not in collections:
        fail(f'Collections: {collections!r}')
    expect((login,), tuple(service.call('ReadAlias', 's', 'default')), 'ReadAlias default')
    expect(('/',), tuple(service.call('ReadAlias', 's', 'nosuch')), 'ReadAlias of nothing')
    service.call('SetAlias', 'so', 'work', login)
    expect((login,), tuple(service.call('ReadAlias', 's', 'work')), 'ReadAlias after SetAlias')
    collection = secretstorage.Collection(connection, login)
    collection.set_label('My Login')
    expect('My Login', collection.get_label(), 'collection label')
    item = collection.create_item('props', {'p': '1'}, b'x')
    address = DBusAddress(login, BUS_NAME, 'org.freedesktop.Secret.Collection')
    reply = connection.send_and_get_reply(Properties(address).get_all())
    values = {key: value for key, (signature, value) in reply.body[0].items()}
    expect({'Items', 'Label', 'Locked', 'Created', 'Modified'}, set(values), 'collection properties')
    if item.item_path not in values['Items']:
        fail('Items lacks the new item')
    status, body = call(connection, login, 'org.freedesktop.DBus.Introspectable', 'Introspect')
    if f'<node name="{item.item_path.rsplit("/", 1)[1]}"' not in body[0] or 'org.freedesktop.Secret.Collection' not in body[0]:
        fail('Introspect of the collection')
    print('ok')


def create_collection(label):
    """CreateCollection through its prompt; the new keychain holds an item; Delete removes it."""
    connection = secretstorage.dbus_init()
    collection = secretstorage.create_collection(connection, label)
    expect(label, collection.get_label(), 'new collection label')
    expect(False, collection.is_locked(), 'a new collection is unlocked')
    item = collection.create_item('in new', {'where': 'new'}, b'new secret')
    expect([item.item_path], [i.item_path for i in secretstorage.search_items(connection, {'where': 'new'})], 'found in the new collection')
    if collection.collection_path not in DBusAddressWrapper(SS_PATH, SERVICE, connection).get_property('Collections'):
        fail('Collections lacks the new collection')
    print(collection.collection_path)


def delete_collection(path):
    connection = secretstorage.dbus_init()
    secretstorage.Collection(connection, path).delete()
    if path in DBusAddressWrapper(SS_PATH, SERVICE, connection).get_property('Collections'):
        fail('Collections still lists the deleted collection')
    expect_error('org.freedesktop.DBus.Error.AccessDenied',
                 call(connection, '/org/freedesktop/secrets/collection/login', 'org.freedesktop.Secret.Collection', 'Delete'),
                 'deleting the default keychain')



def session_collection():
    """libsecret's `session` collection: at collection/session and the `session` alias, listed,
    never locked (Lock leaves it open), not deletable, items served like any other's."""
    connection = secretstorage.dbus_init()
    service = DBusAddressWrapper(SS_PATH, SERVICE, connection)
    path = '/org/freedesktop/secrets/collection/session'
    expect((path,), tuple(service.call('ReadAlias', 's', 'session')), 'ReadAlias session')
    if path not in service.get_property('Collections'):
        fail('Collections lacks the session collection')
    collection = secretstorage.Collection(connection, path)
    item = collection.create_item('temporary', {'kept': 'for-the-session'}, b'session-secret-Q7x')
    expect([item.item_path], [i.item_path for i in secretstorage.search_items(connection, {'kept': 'for-the-session'})], 'found by SearchItems')
    expect(([], '/'), tuple(service.call('Lock', 'ao', [path])), 'Lock leaves the session collection alone')
    expect(False, collection.is_locked(), 'the session collection after Lock')
    expect(b'session-secret-Q7x', item.get_secret(), 'its secret after Lock')
    expect_error('org.freedesktop.DBus.Error.AccessDenied', call(connection, path, 'org.freedesktop.Secret.Collection', 'Delete'),
                 'deleting the session collection')
    expect_error('org.freedesktop.DBus.Error.NotSupported', call(connection, SS_PATH, SERVICE, 'SetAlias', 'so', 'session',
                                                                 '/org/freedesktop/secrets/collection/login'),
                 'pointing the session alias elsewhere')
    expect_error('org.freedesktop.DBus.Error.NotSupported', call(connection, SS_PATH, SERVICE, 'SetAlias', 'so', 'default', path),
                 'making the session collection the default keychain')
    expect(('/org/freedesktop/secrets/collection/login',), tuple(service.call('ReadAlias', 's', 'default')), 'the default after that')
    # A keychain file named session (run.sh makes one) is a collection of its own, on disk.
    on_disk = '/org/freedesktop/secrets/collection/session_2'
    if on_disk not in service.get_property('Collections'):
        fail(f'Collections lacks the keychain named session: {service.get_property("Collections")!r}')
    secretstorage.Collection(connection, on_disk).create_item('kept', {'service': 'disk-session', 'account': 'a'}, b'on-disk-secret')
    expect([], [i.item_path for i in collection.search_items({'service': 'disk-session'})], 'the session collection holds none of it')
    print('ok')


def run_prompt(connection, prompt, timeout=30):
    """Calls Prompt on a prompt object and waits for its Completed: (dismissed, result)."""
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy
    rule = MatchRule(path=prompt, interface='org.freedesktop.Secret.Prompt', member='Completed')
    Proxy(message_bus, connection).AddMatch(rule)
    with connection.filter(rule) as signals:
        expect('ok', call(connection, prompt, 'org.freedesktop.Secret.Prompt', 'Prompt', 's', '')[0], 'Prompt')
        signal = connection.recv_until_filtered(signals, timeout=timeout)
    return signal.body[0], signal.body[1]


def guard_default(other):
    """The second review's first attack: SetAlias("default", <other>) then Delete on login. Both
    are refused; so is deleting the default keychain, wherever it is."""
    connection = secretstorage.dbus_init()
    service = DBusAddressWrapper(SS_PATH, SERVICE, connection)
    login = '/org/freedesktop/secrets/collection/login'
    expect_error('org.freedesktop.DBus.Error.AccessDenied', call(connection, SS_PATH, SERVICE, 'SetAlias', 'so', 'default', other),
                 'moving the default alias')
    expect((login,), tuple(service.call('ReadAlias', 's', 'default')), 'the default after SetAlias')
    expect('ok', call(connection, SS_PATH, SERVICE, 'SetAlias', 'so', 'default', login)[0], 'naming the default what it is')
    expect_error('org.freedesktop.DBus.Error.AccessDenied', call(connection, login, 'org.freedesktop.Secret.Collection', 'Delete'),
                 'deleting the login keychain')
    print('ok')


def delete_refused(path):
    """Delete answers AccessDenied at once, with no prompt."""
    connection = secretstorage.dbus_init()
    expect_error('org.freedesktop.DBus.Error.AccessDenied', call(connection, path, 'org.freedesktop.Secret.Collection', 'Delete'),
                 f'deleting {path}')
    print('ok')


def delete_through_prompt(path, expected):
    """Delete returns a prompt for the keychain's password; `expected` is deleted or dismissed."""
    connection = secretstorage.dbus_init()
    status, body = call(connection, path, 'org.freedesktop.Secret.Collection', 'Delete')
    expect('ok', status, 'Delete')
    if body[0] == '/':
        fail('Delete deleted without asking for the password')
    dismissed, _ = run_prompt(connection, body[0])
    expect(expected == 'dismissed', dismissed, 'Completed dismissed')
    listed = path in DBusAddressWrapper(SS_PATH, SERVICE, connection).get_property('Collections')
    expect(expected == 'dismissed', listed, 'still listed')
    print('ok')


def create_raw(path, replace, *pairs):
    """CreateItem with exactly these attributes (SecretStorage adds none), in a plain session."""
    create_in_plain_session(path, replace == 'replace', pairs)


def create_in_plain_session(path, replace, pairs, before_sending=None):
    connection = secretstorage.dbus_init()
    session = plain_session(connection)
    if before_sending:
        before_sending()
    attributes = dict(zip(pairs[::2], pairs[1::2]))
    properties = {'org.freedesktop.Secret.Item.Label': ('s', 'raw'), 'org.freedesktop.Secret.Item.Attributes': ('a{ss}', attributes)}
    status, body = call(connection, path, 'org.freedesktop.Secret.Collection', 'CreateItem', 'a{sv}(oayays)b',
                        properties, (session.object_path, b'', b'raw-secret', 'text/plain'), replace)
    expect('ok', status, f'CreateItem {body!r}')
    print(body[0])


def pipelined(count):
    """CreateItem calls sent in one write, none waiting for its answer (as libsecret's asynchronous
    calls send them), a refused one among them and a SearchItems behind them: every item is answered
    with its own path, the refused one with its error and nothing else lost, and the search finds
    them all. A few go to the session collection, so one group spans two keychains."""
    count = int(count)
    connection = secretstorage.dbus_init()
    session = plain_session(connection)
    guarded = list(secretstorage.search_items(connection, {'service': 'guarded.example'}))
    expect(1, len(guarded), 'the item that asks for the user')
    guarded_attributes = guarded[0].get_attributes()
    expect(False, guarded[0].get_label() == 'pipelined', 'a label the replacement would change')

    def create(path, attributes, secret, replace=False):
        properties = {'org.freedesktop.Secret.Item.Label': ('s', 'pipelined'),
                      'org.freedesktop.Secret.Item.Attributes': ('a{ss}', attributes)}
        return new_method_call(DBusAddress(path, BUS_NAME, 'org.freedesktop.Secret.Collection'), 'CreateItem',
                               'a{sv}(oayays)b', (properties, (session.object_path, b'', secret, 'text/plain'), replace))

    session_collection = '/org/freedesktop/secrets/collection/session'
    calls = []
    for i in range(count):
        path = session_collection if i % 10 == 3 else DEFAULT
        calls.append(('item', i, path, create(path, {'pipeline': 'yes', 'n': str(i)}, f'secret-{i}'.encode())))
        if i == count // 2:
            # Replacing an item that asks for the user is refused (AccessDenied), in the middle.
            calls.append(('refused', i, DEFAULT, create(DEFAULT, guarded_attributes, b'stolen', replace=True)))
    search = new_method_call(DBusAddress(SS_PATH, BUS_NAME, SERVICE), 'SearchItems', 'a{ss}', ({'pipeline': 'yes'},))
    calls.append(('search', None, None, search))
    # Every store's ItemCreated comes before the search's answer: the service sends both in order.
    bus = DBusAddress('/org/freedesktop/DBus', 'org.freedesktop.DBus', 'org.freedesktop.DBus')
    connection.send_and_get_reply(new_method_call(bus, 'AddMatch', 's', (
        "type='signal',interface='org.freedesktop.Secret.Collection',member='ItemCreated'",)))
    created = set()
    serials = {}
    data = b''
    for kind, i, path, message in calls:
        serial = next(connection.outgoing_serial)
        serials[serial] = (kind, i, path)
        data += message.serialise(serial=serial)
    connection.sock.sendall(data)

    answers = {}
    searched = False
    while len(answers) < len(calls):
        message = connection.receive(timeout=30)
        serial = message.header.fields.get(5)  # HeaderFields.reply_serial
        if serial in serials:
            answers[serial] = message
            searched = searched or serials[serial][0] == 'search'
        elif message.header.message_type == MessageType.signal and not searched:
            created.add(message.body[0])
    paths = {}
    for serial, (kind, i, path) in serials.items():
        message = answers[serial]
        if kind == 'refused':
            expect(MessageType.error, message.header.message_type, 'the refused CreateItem')
            expect('org.freedesktop.DBus.Error.AccessDenied', message.header.fields[4], 'its error')
            continue
        if message.header.message_type == MessageType.error:
            fail(f'{kind} {i}: {message.header.fields[4]} {message.body!r}')
        if kind == 'search':
            found = sorted(message.body[0])
            continue
        item, prompt = message.body
        expect('/', prompt, f'item {i}: no prompt')
        parent = item.rsplit('/', 1)[0]
        if (parent == session_collection) != (path == session_collection):
            fail(f'item {i} answered with a path outside its collection: {item}')
        paths[item] = i
    expect(count, len(paths), 'distinct item paths')
    expect(sorted(paths), sorted(created), 'ItemCreated, once for every item, before the search was answered')
    missing, extra = set(paths) - set(found), set(found) - set(paths)
    if missing or extra:
        fail(f'SearchItems behind the stores: {len(missing)} missing (such as {sorted(missing)[:3]}), {len(extra)} others')
    for item_path, i in paths.items():
        item = secretstorage.Item(connection, item_path)
        expect(f'secret-{i}'.encode(), item.get_secret(), f'item {i} secret')
        expect({'pipeline': 'yes', 'n': str(i)}, item.get_attributes(), f'item {i} attributes')
    kept = list(secretstorage.search_items(connection, {'service': 'guarded.example'}))
    expect([guarded[0].item_path], [k.item_path for k in kept], 'the item that asks for the user is still there')
    expect(guarded[0].get_label(), kept[0].get_label(), 'its label, which a replacement would have changed')
    print('ok')


def pipelined_secrets_wiped(rounds):
    """Rounds of exactly 64 CreateItem calls sent together (a full group) in an encrypted session,
    so the bus carries only ciphertext: once each round is answered, no secret of it is left in
    clear in the service's memory (read through /proc, which its undumpable flag keeps to root)."""
    connection = secretstorage.dbus_init()
    session = open_session(connection)
    bus = DBusAddress('/org/freedesktop/DBus', 'org.freedesktop.DBus', 'org.freedesktop.DBus')
    pid = connection.send_and_get_reply(new_method_call(bus, 'GetConnectionUnixProcessID', 's', (BUS_NAME,))).body[0]

    def secret(i):
        # Large and of varied sizes, as the heap keeps big buffers apart; the marker is what is looked for.
        return b'P' * (4096 + 64 * (i % 64)) + f'WIPEPROOF-{i:05d}-'.encode() + b'Q' * 150

    def left_in_memory():
        found = set()
        with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb', 0) as memory:
            for line in maps:
                span, mode = line.split()[:2]
                if not mode.startswith('rw'):
                    continue
                low, high = (int(x, 16) for x in span.split('-'))
                try:
                    memory.seek(low)
                    chunk = memory.read(high - low)
                except OSError:
                    continue
                found.update(int(m.group(1)) for m in re.finditer(rb'WIPEPROOF-(\d{5})-QQQQQQQQQQ', chunk))
        return found

    collection = '/org/freedesktop/secrets/collection/session'
    for r in range(int(rounds)):
        data, serials = b'', set()
        for i in range(r * 64, r * 64 + 64):
            properties = {'org.freedesktop.Secret.Item.Label': ('s', f'w{i}'),
                          'org.freedesktop.Secret.Item.Attributes': ('a{ss}', {'wipe': 'yes', 'n': str(i)})}
            message = new_method_call(DBusAddress(collection, BUS_NAME, 'org.freedesktop.Secret.Collection'), 'CreateItem',
                                      'a{sv}(oayays)b', (properties, format_secret(session, secret(i), 'text/plain'), False))
            serial = next(connection.outgoing_serial)
            serials.add(serial)
            data += message.serialise(serial=serial)
        connection.sock.sendall(data)
        while serials:
            message = connection.receive(timeout=30)
            if message.header.fields.get(5) in serials:
                serials.discard(message.header.fields.get(5))
                if message.header.message_type == MessageType.error:
                    fail(f'round {r}: {message.body!r}')
        left = left_in_memory()
        if left:
            fail(f'after round {r}: secrets still in clear in the service: {sorted(left)}')
    print('ok')


def create_on_cue(ready, go, path, *pairs):
    """create_raw with replace, its session opened first: writes `ready`, and sends CreateItem once
    `go` exists."""
    import time

    def cue():
        with open(ready, 'w') as f:
            f.write('ready')
        while not os.path.exists(go):
            time.sleep(0.01)
    create_in_plain_session(path, True, pairs, cue)


def count(*pairs):
    connection = secretstorage.dbus_init()
    print(len(list(secretstorage.search_items(connection, dict(zip(pairs[::2], pairs[1::2]))))))


def foreign_prompt():
    """A prompt belongs to the connection that caused it: another can neither dismiss it nor
    raise its dialog."""
    owner = secretstorage.dbus_init()
    unlocked, prompt = DBusAddressWrapper(SS_PATH, SERVICE, owner).call('Unlock', 'ao', [DEFAULT])
    if prompt == '/':
        fail('no prompt for a locked collection')
    stranger = secretstorage.dbus_init()
    for method, signature, body in (('Dismiss', '', ()), ('Prompt', 's', ('',))):
        expect_error('org.freedesktop.Secret.Error.NoSuchObject',
                     call(stranger, prompt, 'org.freedesktop.Secret.Prompt', method, signature, *body), f'{method} by another client')
    expect('ok', call(owner, prompt, 'org.freedesktop.Secret.Prompt', 'Dismiss')[0], 'Dismiss by its owner')
    print('ok')


def prompt_limits(cap):
    """A client holds at most `cap` prompts; asked all at once, their pinentries run one at a time."""
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy
    connection = secretstorage.dbus_init()
    service = DBusAddressWrapper(SS_PATH, SERVICE, connection)
    prompts = [service.call('Unlock', 'ao', [DEFAULT])[1] for _ in range(int(cap))]
    if '/' in prompts or len(set(prompts)) != int(cap):
        fail(f'prompts: {prompts!r}')
    expect_error('org.freedesktop.DBus.Error.LimitsExceeded', call(connection, SS_PATH, SERVICE, 'Unlock', 'ao', [DEFAULT]),
                 'one prompt more than the cap')
    rule = MatchRule(interface='org.freedesktop.Secret.Prompt', member='Completed')
    Proxy(message_bus, connection).AddMatch(rule)
    completed = set()
    with connection.filter(rule) as signals:
        for prompt in prompts:
            expect('ok', call(connection, prompt, 'org.freedesktop.Secret.Prompt', 'Prompt', 's', '')[0], 'Prompt')
        while len(completed) < len(prompts):
            signal = connection.recv_until_filtered(signals, timeout=60)
            completed.add(signal.header.fields[1])  # HeaderFields.path
    expect(set(prompts), completed, 'every prompt completed')
    # Room again once they are done.
    expect('ok', call(connection, SS_PATH, SERVICE, 'Unlock', 'ao', [DEFAULT])[0], 'a prompt after the others completed')
    print('ok')


def presence_item(*pairs):
    """An item that asks for the user is found, but its secret is refused with AccessDenied, not
    IsLocked (which sends libsecret to Unlock an unlocked collection, round and round)."""
    connection = secretstorage.dbus_init()
    items = list(secretstorage.search_items(connection, dict(zip(pairs[::2], pairs[1::2]))))
    expect(1, len(items), 'items found')
    session = open_session(connection)
    expect_error('org.freedesktop.DBus.Error.AccessDenied',
                 call(connection, items[0].item_path, 'org.freedesktop.Secret.Item', 'GetSecret', 'o', session.object_path),
                 'GetSecret of an item that asks for the user')
    expect(False, items[0].is_locked(), 'the item is not shown as locked')
    print('ok')


def listen(ready, seconds):
    """Prints every signal the service broadcasts for `seconds`, after writing `ready`."""
    from jeepney import MatchRule, message_bus
    from jeepney.io.blocking import Proxy
    connection = secretstorage.dbus_init()
    Proxy(message_bus, connection).AddMatch(MatchRule(type='signal', sender=BUS_NAME))
    with open(ready, 'w') as f:
        f.write('ready')
    import time
    deadline = time.time() + float(seconds)
    # The messages carry the service's unique name, not BUS_NAME: filtered here by path.
    with connection.filter(MatchRule(type='signal', path_namespace='/org/freedesktop/secrets')) as signals:
        while time.time() < deadline:
            try:
                signal = connection.recv_until_filtered(signals, timeout=max(0.1, deadline - time.time()))
            except TimeoutError:
                break
            print(signal.header.fields[3], signal.body, flush=True)  # HeaderFields.member


def app_prompts(app):
    """A sandboxed app holds one prompt, however many connections it opens; the dialog names it."""
    first = secretstorage.dbus_init()
    unlocked, prompt = DBusAddressWrapper(SS_PATH, SERVICE, first).call('Unlock', 'ao', [DEFAULT])
    if prompt == '/':
        fail('no prompt for a locked collection')
    for _ in range(3):
        other = secretstorage.dbus_init()
        expect_error('org.freedesktop.DBus.Error.LimitsExceeded', call(other, SS_PATH, SERVICE, 'Unlock', 'ao', [DEFAULT]),
                     'a second prompt of the same app')
    dismissed, _ = run_prompt(first, prompt)
    expect(True, dismissed, 'the prompt, cancelled')
    expect('ok', call(first, SS_PATH, SERVICE, 'Unlock', 'ao', [DEFAULT])[0], 'a prompt once the first completed')
    print('ok')


def pid_reuse(ready, go, ping=''):
    """Connects from a child that passes the socket back and exits, then calls once the child's pid
    belongs to another process: the caller must not take that process's identity. With `ping`, the
    service is pinged first, so it has seen the connection appear before the pid is reused."""
    import socket
    import time
    from jeepney.bus import get_bus
    from jeepney.io.blocking import DBusConnection, prep_socket
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child = os.fork()
    if child == 0:
        bus_socket = prep_socket(get_bus('SESSION'), False, timeout=5.)
        socket.send_fds(parent_end, [b'x'], [bus_socket.fileno()])
        os._exit(0)
    _, fds, _, _ = socket.recv_fds(child_end, 10, 1)
    os.waitpid(child, 0)
    connection = DBusConnection(socket.socket(fileno=fds[0]))
    if ping:
        expect('ok', call(connection, '/', 'org.freedesktop.DBus.Peer', 'Ping')[0], 'Ping')
    with open(ready, 'w') as f:
        f.write(str(child))
    deadline = time.time() + 20
    while not os.path.exists(go):
        if time.time() > deadline:
            fail('never told to go on')
        time.sleep(0.05)
    expect_error('org.freedesktop.DBus.Error.AccessDenied', call(connection, SS_PATH, SERVICE, 'SearchItems', 'a{ss}', {}),
                 'SearchItems from a connection whose pid now belongs to another process')
    print('ok')


def relabel(name, value, label):
    """Gives the item with this one attribute a new label."""
    connection = secretstorage.dbus_init()
    items = list(secretstorage.search_items(connection, {name: value}))
    expect(1, len(items), 'items to relabel')
    items[0].set_label(label)


def read_alias(name):
    connection = secretstorage.dbus_init()
    print(DBusAddressWrapper(SS_PATH, SERVICE, connection).call('ReadAlias', 's', name)[0])


def set_alias_refused(name, path):
    connection = secretstorage.dbus_init()
    expect_error('org.freedesktop.DBus.Error.AccessDenied', call(connection, SS_PATH, SERVICE, 'SetAlias', 'so', name, path),
                 f'SetAlias {name} {path}')
    print('ok')


def paths(*pairs):
    """The object paths of the items these pairs find, one a line."""
    connection = secretstorage.dbus_init()
    for item in secretstorage.search_items(connection, dict(zip(pairs[::2], pairs[1::2]))):
        print(item.item_path)


def confined(app, *others):
    """Run inside a sandbox naming `app`: its own items only, nothing of the user's keychains to
    alias, lock, make or delete. `others` are paths of items it must not reach."""
    connection = secretstorage.dbus_init()
    service = DBusAddressWrapper(SS_PATH, SERVICE, connection)
    collection = secretstorage.get_default_collection(connection)
    mine = collection.create_item('mine', {'owner-test': app}, f'secret-of-{app}'.encode())
    # Git's credential's attributes, replace=True: a new item of the app's, git's untouched.
    planted = collection.create_item('planted', {'server': 'git.example.com', 'user': 'ann', 'protocol': 'https'}, b'planted', replace=True)
    # What another program will look up later: Chromium's key, a VPN password.
    chrome = collection.create_item('Chromium Safe Storage', {'application': 'chrome', 'xdg:schema': 'chrome_libsecret_os_crypt_password_v2'},
                                    b'attacker-chosen-key')
    vpn = collection.create_item('VPN', {'service': 'vpn.example', 'username': 'alice'}, b'attacker-chosen-key')
    own = sorted([mine.item_path, planted.item_path, chrome.item_path, vpn.item_path])
    unlocked, locked = service.call('SearchItems', 'a{ss}', {})
    expect(own, sorted(unlocked), 'SearchItems of everything')
    expect([], locked, 'locked items found')
    expect(own, sorted(i.item_path for i in collection.get_all_items()), 'Items')
    expect([planted.item_path], [i.item_path for i in collection.search_items({'server': 'git.example.com'})], 'git\'s server')
    expect(f'secret-of-{app}'.encode(), mine.get_secret(), 'its own secret')
    session = open_session(connection)
    for path in others:
        for method, signature, body in (('GetSecret', 'o', (session.object_path,)), ('Delete', '', ())):
            expect_error('org.freedesktop.Secret.Error.NoSuchObject', call(connection, path, 'org.freedesktop.Secret.Item', method, signature, *body),
                         f'{method} of {path}')
        expect_error('org.freedesktop.Secret.Error.NoSuchObject',
                     call(connection, path, 'org.freedesktop.DBus.Properties', 'Get', 'ss', 'org.freedesktop.Secret.Item', 'Label'),
                     f'the label of {path}')
        expect_error('org.freedesktop.Secret.Error.NoSuchObject',
                     call(connection, path, 'org.freedesktop.DBus.Properties', 'Set', 'ssv', 'org.freedesktop.Secret.Item', 'Label', ('s', 'x')),
                     f'relabelling {path}')
    expect(({},), (service.call('GetSecrets', 'aoo', list(others), session.object_path)[0],), 'GetSecrets of the others')
    login = '/org/freedesktop/secrets/collection/login'
    denied = 'org.freedesktop.DBus.Error.AccessDenied'
    expect_error(denied, call(connection, SS_PATH, SERVICE, 'SetAlias', 'so', 'work', login), 'SetAlias')
    expect_error(denied, call(connection, login, 'org.freedesktop.Secret.Collection', 'Delete'), 'Delete of the login keychain')
    expect_error(denied, call(connection, SS_PATH, SERVICE, 'Lock', 'ao', [login]), 'Lock')
    expect_error(denied, call(connection, SS_PATH, SERVICE, 'LockService'), 'LockService')
    expect_error(denied, call(connection, SS_PATH, SERVICE, 'CreateCollection', 'a{sv}s', {}, ''), 'CreateCollection')
    expect_error(denied, call(connection, login, 'org.freedesktop.DBus.Properties', 'Set', 'ssv',
                              'org.freedesktop.Secret.Collection', 'Label', ('s', 'mine')), 'renaming the keychain')
    expect(False, collection.is_locked(), 'still unlocked')
    print('ok')

if __name__ == '__main__':
    globals()[sys.argv[1].replace('-', '_')](*sys.argv[2:])
