import Glibc

/// Where the broker listens and keeps its state, unless told otherwise (`--socket`, `--state`;
/// `KEYCHAIN_BROKER_SOCKET` for a client, which checks who answers before it trusts it).
package enum BrokerPaths {
    package static let socket = "/run/keychain-broker/socket"
    package static let state = "/run/keychain-broker"

    /// The socket a client uses: the environment's, else the system's.
    package static var clientSocket: String {
        if let value = getenv("KEYCHAIN_BROKER_SOCKET"), value.pointee != 0 { return String(cString: value) }
        return socket
    }
}
