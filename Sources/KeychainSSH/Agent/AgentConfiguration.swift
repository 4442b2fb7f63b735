package import KeychainCore
internal import Glibc

/// What the executable fills from its command line.
package struct AgentConfiguration: Sendable {
    /// ssh-agent -t: the lifetime of keys added without one; such keys stay in memory.
    package var defaultLifetime: UInt32?
    /// Where keys added without a lifetime are kept; nil: memory only.
    package var vault: SSHKeyVault?
    /// `--session`: every key in memory only, even with a vault.
    package var sessionOnly = false
    /// Asks the person before a confirm-constrained key (`ssh-add -c`) signs: the question names
    /// the program, the key and the destination; the default refuses.
    package var confirm: @Sendable (AccessQuestion) -> Bool = { _ in false }
    /// Seconds an approval counts for the same program and key; 0: never remembered.
    package var rememberConfirmation: UInt32 = 0
    /// Where a broker keeps the keychain's keys: runs the read of a kept key's item for the
    /// client that asks for a signature (the broker judges that client, against the key's list,
    /// and asks the person the question when it is not on it). nil: the agent reads as itself.
    package var relay: (@Sendable (SigningClient, () -> Void) -> Void)?
    /// With `relay`: has the broker judge a client (its pidfd, borrowed) without waiting, as it
    /// connects, so that the judging overlaps the listing of keys and the client's own work
    /// before its signature request.
    package var judgeAhead: (@Sendable (Int32) -> Void)?
    /// Identities held at once, memory and keychain together.
    package var maximumIdentities = AgentLimits.maximumIdentities
    /// ssh-agent -E.
    package var fingerprintHash: SSHFingerprintHash = .sha256
    /// One line to the journal or stderr.
    package var log: @Sendable (String) -> Void = { _ in }
    /// Seconds on a clock that does not jump (lifetimes, remembered approvals); tests move it.
    package var clock: @Sendable () -> Double = { SystemClock.monotonic() }
    /// Seconds since 1970, for certificates' validity.
    package var wallClock: @Sendable () -> Double = { SystemClock.now() }
    /// The pause after a wrong unlock passphrase (ssh-agent's: 0.1 s more per failure, up to 10 s).
    package var unlockDelay: @Sendable (Double) -> Void = { seconds in
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }

    package init() {}
}

/// The program a signature is for, as the agent passes it to the broker (`AgentConfiguration.relay`).
package struct SigningClient: Sendable {
    /// The client's pidfd, borrowed for the request.
    package var pidfd: Int32
    /// Ask the person whatever the key's list says: a `-c` key, or a request from a host the
    /// agent is forwarded to that the key's constraints do not name.
    package var confirmEach: Bool
    /// The key asks before each use (`ssh-add -c`).
    package var confirmsKey: Bool
    /// The agent's question (the program, the key, its fingerprint, where the signature goes),
    /// shown with the broker's.
    package var question: AccessQuestion
}
