import Glibc

/// Where the broker listens and keeps its state, unless told otherwise (`--socket`, `--state`, `--pins`;
/// `KEYCHAIN_BROKER_SOCKET` for a client: `BrokerSetup`, which checks who answers before it trusts it).
package enum BrokerPaths {
    package static let socket = "/run/keychain-broker/socket"
    package static let state = "/run/keychain-broker"
    /// The pins of keychains to their paths (`--pins`): kept across reboots, unlike the state.
    package static let pins = "/var/lib/keychain-broker"
}
