import Glibc
import KeychainCore
import KeychainPeers

/// One connected client, as the kernel recorded it at connect(2): its uid, pid and the process
/// pinned (`CallerHandle`: SO_PEERPIDFD's pidfd where the kernel gives one, else a pidfd opened at
/// accept for a process that had started by then). Who it is, is evaluated once and kept while
/// the process runs the same image (`CallerTrust.stillSame`); an exec asks again.
package final class BrokerPeer {
    package let uid: UInt32
    package let pid: Int32
    package let handle: CallerHandle
    private var cached: (any CallerFacts)?
    /// The process a deputy relays the request being served for (`RelayedProcess`); set by the
    /// listener for that one request.
    package var relayed: RelayedProcess?
    /// The processes relayed on this connection lately, as evaluated, each with the handle it
    /// was evaluated through: a deputy asks several item keys for one client (the SSH agent, for
    /// one signature), each with a new pidfd of the same process, which is judged once while it
    /// runs the same image. Several, not one: the agent has each client judged as it connects
    /// (`BrokerCustodian.judgeAhead`), and clients that connect at once sign after.
    /// `ahead`: judged for a whoAmI (the agent's as its client connects) and used for no item key
    /// since; the first unwrap checks its mappings too (`CallerTrust.stillSame`'s `mappingsToo`).
    private var relayedFacts: [(handle: CallerHandle, facts: any CallerFacts, ahead: Bool)] = []
    /// How many relayed processes a connection keeps judged: each holds its handle's descriptors.
    static let relayedLimit = 8

    /// `pidfd` is borrowed (the handle keeps its own copy); -1 when the kernel gave none.
    package init(uid: UInt32, pid: Int32, pidfd: Int32 = -1, acceptedAt: UInt64? = nil) {
        self.uid = uid
        self.pid = pid
        handle = CallerHandle(pid: pid, pidfd: pidfd >= 0 ? pidfd : nil, startedBy: pidfd >= 0 ? nil : acceptedAt)
    }

    package func facts(_ evaluate: CallerEvaluator) -> any CallerFacts {
        if let cached {
            // A record made by hand (tests) carries no process to check: evaluated again.
            if let record = cached as? CallerRecord, let caller = record.caller, CallerTrust.stillSame(caller, handle: handle) { return cached }
        }
        let facts = evaluate(handle, uid)
        cached = facts
        return facts
    }

    /// The facts of the process `relayed` names: those kept for it when it is the same process
    /// still running the same image (its pid, and the earlier handle's descriptors still reading:
    /// a pid is not given to another process while the one holding it lives, and the earlier
    /// process held it from before `relayed`'s pidfd was read until now).
    /// `forKey`: for an unwrap, not a whoAmI.
    package func facts(of relayed: RelayedProcess, forKey: Bool = true, _ evaluate: CallerEvaluator) -> any CallerFacts {
        let pid = relayed.pid
        if let index = relayedFacts.firstIndex(where: { $0.handle.pid == pid }) {
            let (handle, facts, ahead) = relayedFacts.remove(at: index)
            if let record = facts as? CallerRecord, let caller = record.caller, caller.pid == pid,
                CallerTrust.stillSame(caller, handle: handle, mappingsToo: ahead && forKey)
            {
                relayedFacts.append((handle, facts, ahead && !forKey))
                return facts
            }
        }
        let facts = evaluate(relayed.handle, uid)
        if relayedFacts.count >= Self.relayedLimit { relayedFacts.removeFirst() }
        relayedFacts.append((relayed.handle, facts, !forKey))
        return facts
    }

    /// Forgets the relayed processes that have exited (each SSH client does, after its
    /// signature): called after a reply is sent, so that closing their descriptors is not
    /// in the time of the next judging.
    package func sweepRelayed() {
        guard !relayedFacts.isEmpty else { return }
        relayedFacts.removeAll { !$0.handle.isAlive }
    }
}
