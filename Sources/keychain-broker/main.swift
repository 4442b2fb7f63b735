import Glibc
import KeychainBroker
import KeychainCore

// keychain-broker [--socket PATH] [--state DIR] [--pins DIR] [--own-program PATH]... [--deputy PATH]... [--foreground]
// The keeper of the keychain's class keys: a system service of its own user, which the user's
// processes can neither read nor trace (see KeychainBroker and BROKER-SPEC).

func fail(_ message: String, status: Int32 = 1) -> Never {
    fputs("keychain-broker: \(message)\n", stderr)
    exit(status)
}

var socketPath = BrokerPaths.socket
var stateDirectory = BrokerPaths.state
var pinsDirectory = BrokerPaths.pins
var ownPrograms: [String] = []
var deputies: [String] = []
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--socket", "--state", "--pins", "--own-program", "--deputy":
        guard let value = arguments.popFirst(), value.hasPrefix("/") else { fail("\(argument) needs an absolute path", status: 2) }
        switch argument {
        case "--socket": socketPath = value
        case "--state": stateDirectory = value
        case "--pins": pinsDirectory = value
        case "--deputy": deputies.append(value)
        default: ownPrograms.append(value)
        }
    case "--foreground": break  // It never forks: the flag is for scripts that start it by hand.
    case "--help", "-h":
        print("usage: keychain-broker [--socket PATH] [--state DIR] [--pins DIR] [--own-program PATH]... [--deputy PATH]... [--foreground]")
        exit(0)
    default: fail("unknown argument \(argument)", status: 2)
    }
}

// Root could read every user's keys anyway but must not hold them by accident; an ordinary uid
// is one the user's processes could share.
let uid = getuid()
if uid == 0 || geteuid() == 0 { fail("refusing to run as root: run it as its own system user") }
if uid >= BrokerSocket.uidMin { fail("refusing to run as uid \(uid), an ordinary user: run it as its own system user") }

// Keys in memory stay out of core files and out of reach of the broker's own uid; its
// CAP_SYS_PTRACE reads callers' /proc files and is never used to trace or read memory.
if let failure = BrokerHardening.apply() { fail(failure) }

let listening: Int32
if let activated = BrokerListener.activatedSocket() {
    listening = activated
} else {
    do { listening = try BrokerListener.bind(socketPath) } catch { fail("\(error)") }
}

mkdir(stateDirectory, 0o700)
mkdir(pinsDirectory, 0o700)
let store = BrokerStateStore(directory: stateDirectory, pinsDirectory: pinsDirectory)
var restored = BrokerState()
do {
    if let state = try store.load() { restored = state }
} catch {
    fputs("keychain-broker: the previous state could not be read (\(error)): starting locked\n", stderr)
}
// The pins folder's pins over the state's: they outlived the reboot that emptied /run (the
// state's are taken over when there is no pins file yet, from a broker that kept none there).
do {
    if let pins = try store.loadPins() {
        restored.pins = pins
    } else if !restored.pins.isEmpty {
        try store.savePins(restored.pins)
    }
} catch {
    fputs("keychain-broker: the pins in \(pinsDirectory) could not be read (\(error)): only those of the state are kept\n", stderr)
}
let service = BrokerService(
    decision: AccessDecision(
        ownPrograms: ownPrograms.isEmpty ? AccessDecision.defaultOwnPrograms : ownPrograms,
        deputies: deputies.isEmpty ? AccessDecision.defaultDeputies : deputies),
    store: store, state: restored)
openlog("keychain-broker", LOG_PID, LOG_AUTHPRIV)
fputs("keychain-broker: serving \(socketPath)\n", stderr)
BrokerListener(listening: listening, service: service, store: store).run()
