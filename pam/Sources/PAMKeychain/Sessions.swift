import KeychainBroker
import KeychainCore

/// How many sessions the user has open, counted in the user's persistent kernel keyring so that
/// it lives exactly as long as the unlocked class keys it guards. Where keychain-broker keeps the
/// keys, `BrokerSessions` counts instead: any process of the user can write this count, and one
/// that raised it would keep the keychain unlocked after the last logout.
enum Sessions {
    static let name = "keychain-sessions"

    static var count: Int {
        guard let bytes = KernelKeyring.read(name) else { return 0 }
        return Int(String(decoding: bytes, as: UTF8.self)) ?? 0
    }

    static func set(_ value: Int) {
        if value <= 0 {
            KernelKeyring.remove(name)
        } else {
            try? KernelKeyring.store(Array(String(value).utf8), description: name)
        }
    }
}

/// The sessions as keychain-broker counts them: asked by root (this module, before its worker
/// becomes the user), so that only logins move the count. Nil where no broker keeps the keys:
/// `Sessions` counts then, as before.
enum BrokerSessions {
    static func opened(_ account: AsUser.Account) -> UInt32? { ask(.opened, account, failing: nil) }

    /// The sessions left; 0 when the broker cannot say, so that the last session's lock is never
    /// skipped by a broker that does not answer.
    static func closed(_ account: AsUser.Account) -> UInt32? { ask(.closed, account, failing: 0) }

    static func count(_ account: AsUser.Account) -> UInt32? { ask(.count, account, failing: 0) }

    private static func ask(_ event: SessionEvent, _ account: AsUser.Account, failing: UInt32?) -> UInt32? {
        guard let broker = BrokerSetup.installed else { return nil }
        return (try? broker.session(event, for: UInt32(account.uid), keychain: account.loginKeychain)) ?? failing
    }
}
