import CLinux
import Glibc
import KeychainCore
import KeychainPeers

/// The broker's one loop: a listening SOCK_SEQPACKET socket and up to `maximumConnections`
/// clients in one poll(2), each request answered in turn by the service. Serial: a password's
/// scrypt (about 0.2 s) delays the other clients by that much, which stage 1 accepts.
package final class BrokerListener {
    package static let maximumConnections = 128
    /// Each uid's share: a process keeps one connection, so a user's own programs need a few; a
    /// user holding more would shut every other user out of their keychains.
    package static let maximumConnectionsPerUid = 32
    let listening: Int32
    let service: BrokerService
    let store: BrokerStateStore?
    private var peers: [Int32: BrokerPeer] = [:]
    /// Connections sent a notice (`BrokerWire.notice`) since their last request: one unread is
    /// enough to tell the client, so no other is queued behind it.
    private var noticed: Set<Int32> = []

    package init(listening: Int32, service: BrokerService, store: BrokerStateStore?) {
        self.listening = listening
        self.service = service
        self.store = store
    }

    /// A socket from systemd (LISTEN_FDS=1, LISTEN_PID ours: descriptor 3), else nil.
    package static func activatedSocket() -> Int32? {
        guard let pid = getenv("LISTEN_PID").map({ String(cString: $0) }), pid_t(pid) == getpid(),
            let count = getenv("LISTEN_FDS").map({ String(cString: $0) }), let n = Int(count), n >= 1
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        BrokerSocket.passCredentials(3)
        return 3
    }

    /// Binds `path` itself: the folder 0755 (made if missing), the socket 0666, for every user.
    package static func bind(_ path: String) throws -> Int32 {
        var address = try BrokerSocket.address(path)
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !folder.isEmpty {
            mkdir(folder, 0o755)
            chmod(folder, 0o755)
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else { throw KeychainError.param("\(path) exists and is not a socket") }
            unlink(path)
        }
        let fd = socket(AF_UNIX, BrokerSocket.seqpacket, 0)
        guard fd >= 0 else { throw KeychainError(.io, "socket: \(String(cString: strerror(errno)))") }
        let previous = umask(0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        let bindError = errno
        umask(previous)
        // Set before listen: a connection inherits it, so its first message already says who sent it.
        BrokerSocket.passCredentials(fd)
        guard bound == 0, chmod(path, 0o666) == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw KeychainError(.io, "\(path): \(String(cString: strerror(bindError)))")
        }
        return fd
    }

    /// Runs until SIGTERM, SIGINT or SIGHUP.
    package func run() {
        _ = clinux_catch_termination()
        var lastSweep = SystemClock.monotonic(), lastRenew = lastSweep, lastLogSave = lastSweep
        store?.renew()
        while clinux_termination_requested() == 0 {
            var fds = [pollfd(fd: listening, events: Int16(POLLIN), revents: 0)]
            let order = Array(peers.keys)
            fds += order.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), service.hasUnsavedLog ? 5_000 : 30_000)
            if ready < 0, errno != EINTR { break }
            let now = SystemClock.monotonic()
            if now - lastSweep >= 30 {
                service.sweep()
                service.persistIfChanged()
                tellChanges()
                lastSweep = now
            }
            if service.hasUnsavedLog, now - lastLogSave >= 5 {
                service.persistIfChanged(includingLog: true)
                lastLogSave = now
            }
            // The persistent keyring expires after days without a get_persistent: renew hourly.
            if now - lastRenew >= 3600 {
                store?.renew()
                lastRenew = now
            }
            guard ready > 0 else { continue }
            for (index, fd) in order.enumerated() {
                let events = fds[index + 1].revents
                guard events != 0 else { continue }
                serve(fd, hungUp: events & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 && events & Int16(POLLIN) == 0)
            }
            if fds[0].revents & Int16(POLLIN) != 0 { accept() }
        }
        service.persistIfChanged(includingLog: true)
    }

    private func accept() {
        // accept4 is a GNU extension Swift's Glibc does not export; the broker runs no program,
        // so no exec can come between the accept and the flag.
        let fd = Glibc.accept(listening, nil, nil)
        guard fd >= 0 else { return }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        BrokerSocket.allowLargeMessages(fd)
        BrokerSocket.passCredentials(fd)
        guard peers.count < Self.maximumConnections, let credentials = BrokerSocket.peer(of: fd),
            peers.values.lazy.filter({ $0.uid == credentials.uid }).count < Self.maximumConnectionsPerUid
        else {
            close(fd)
            return
        }
        let pidfd = BrokerSocket.peerPidfd(of: fd)
        peers[fd] = BrokerPeer(uid: credentials.uid, pid: credentials.pid, pidfd: pidfd, acceptedAt: ProcessIdentity.ticksSinceBoot())
        if pidfd >= 0 { close(pidfd) }
    }

    private func serve(_ fd: Int32, hungUp: Bool) {
        guard !hungUp, let peer = peers[fd] else { return drop(fd) }
        var message: Bytes
        var passed: Int32 = -1
        // A descriptor nothing took over is closed with the request.
        defer { if passed >= 0 { close(passed) } }
        do {
            var sender: Int32 = -1
            guard let received = try BrokerSocket.receive(fd, sender: &sender, passed: &passed) else { return drop(fd) }
            // The client reads any notice before this request's reply: the next change is told again.
            noticed.remove(fd)
            // Identity is the process that connected; a message another process sent on its
            // connection (the descriptor inherited, passed or taken) would speak as it.
            guard sender == peer.pid else {
                var refused = received
                refused.wipe()
                fputs("keychain-broker: a message on the connection of pid \(peer.pid) came from pid \(sender): connection closed\n", stderr)
                return drop(fd)
            }
            message = received
        } catch let error as SocketError where error.errno == EAGAIN || error.errno == EINTR {
            return
        } catch let error as KeychainError {
            // Too long: answered, and the connection kept (SEQPACKET dropped the rest).
            try? BrokerSocket.send(fd, BrokerReply.failure(error).encoded())
            return
        } catch {
            return drop(fd)
        }
        // A relayed caller: the pidfd and the marks come together, or the request is refused.
        let marks = RelayMarks.of(message)
        if passed >= 0 || !marks.isEmpty {
            let given = passed
            passed = -1
            guard given >= 0, marks.contains(.relayedCaller), let relayed = RelayedProcess(pidfd: given, marks: marks) else {
                if given >= 0, !marks.contains(.relayedCaller) { close(given) }
                message.wipe()
                let refusal = KeychainError.param("a relayed caller's pidfd and the request's relay marks must come together")
                do { try BrokerSocket.send(fd, BrokerReply.failure(refusal).encoded()) } catch { drop(fd) }
                return
            }
            peer.relayed = relayed
        }
        defer { peer.relayed = nil }
        var reply = service.handle(message, from: peer)
        // Both may hold a password or a key.
        defer {
            message.wipe()
            reply.wipe()
        }
        do { try BrokerSocket.send(fd, reply) } catch { drop(fd) }
        tellChanges()
        service.flushLog()
        peer.sweepRelayed()
    }

    /// Every connection of a uid whose keys changed gets a notice, after the reply that changed
    /// them. A connection whose buffer is too full to take it is closed: the client reads a
    /// closed connection as a change, where unread replies it may drop (those of requests sent
    /// ahead) would not tell it of one (review 56).
    private func tellChanges() {
        let uids = service.takeChangedUids()
        guard !uids.isEmpty else { return }
        for (fd, peer) in peers where uids.contains(peer.uid) && !noticed.contains(fd) {
            noticed.insert(fd)
            do {
                try BrokerSocket.send(fd, BrokerWire.notice)
            } catch {
                drop(fd)
            }
        }
    }

    private func drop(_ fd: Int32) {
        if let peer = peers[fd] { service.connectionClosed(peer) }
        peers[fd] = nil
        noticed.remove(fd)
        close(fd)
    }
}
