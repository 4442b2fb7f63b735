import Glibc
import KeychainBroker

// keychain-broker: the keeper of the keychain's class keys (see KeychainBroker). Its service
// loop is the next commit; until then it says so and fails, rather than pretend to listen.
fputs("keychain-broker: not yet serving (\(BrokerPaths.socket))\n", stderr)
exit(69)
