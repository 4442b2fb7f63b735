internal import CLinux
internal import Glibc
package import KeychainCore

/// Serves the agent protocol's framing on a listening socket: a thread per connection, so that a
/// client waiting on a confirmation prompt holds only its own connection, and a bound on how many
/// connections and how large a message, so that no client makes the agent grow without bound.
/// It knows nothing of the messages: each connection gets a handler from the factory, built for
/// its peer, that answers one message (the bytes after the length) or closes with nil.
package final class AgentServer: @unchecked Sendable {
    package typealias Handler = (Bytes) -> Bytes?
    package typealias HandlerFactory = @Sendable (AgentPeer) -> Handler

    /// OpenSSH's AGENT_MAX_LEN: no legitimate message comes near it (an RSA-16384 key with a
    /// certificate is under 10 KiB), and it bounds what one connection can make the agent hold.
    package static let maximumMessage = 256 * 1024
    package static let maximumConnections = 128

    private let listener: Int32
    private let makeHandler: HandlerFactory
    private let log: @Sendable (String) -> Void
    private let maximumConnections: Int
    private let wake: (read: Int32, write: Int32)
    private var mutex = pthread_mutex_t()
    private var connections = 0

    package init(
        listening descriptor: Int32, maximumConnections: Int = AgentServer.maximumConnections, log: @escaping @Sendable (String) -> Void,
        handlerFactory: @escaping HandlerFactory
    ) throws {
        listener = descriptor
        makeHandler = handlerFactory
        self.log = log
        self.maximumConnections = maximumConnections
        var fds: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&fds) == 0 else { throw AgentServerError("pipe: \(String(cString: strerror(errno)))") }
        wake = (fds[0], fds[1])
        pthread_mutex_init(&mutex, nil)
    }

    deinit {
        close(wake.read)
        close(wake.write)
        pthread_mutex_destroy(&mutex)
    }

    package var activeConnections: Int { locked { connections } }

    /// Accepts until `stop()`, a termination signal (clinux_catch_termination) or `keepRunning`,
    /// asked every `checkInterval` seconds, says no (ssh-agent's check that the command it
    /// started is still there).
    package func run(checkInterval: Int32 = -1, keepRunning: () -> Bool = { true }) {
        var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        while clinux_termination_requested() == 0 {
            // Never forever: a signal that lands between the flag's check and poll is seen at the
            // next wake-up, at most ten seconds later.
            let ready = poll(&fds, 2, (checkInterval < 0 ? 10 : min(checkInterval, 10)) * 1000)
            if ready < 0 && errno != EINTR { return log("poll: \(String(cString: strerror(errno)))") }
            if fds[1].revents != 0 { return }
            if ready <= 0 || fds[0].revents == 0 {
                if !keepRunning() { return }
                continue
            }
            acceptOne()
        }
    }

    package func stop() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    private func acceptOne() {
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return }
        // accept4's SOCK_CLOEXEC is not in Swift's Glibc; programs the agent starts (polkit's
        // pkcheck) close every inherited descriptor anyway (ChildProcess).
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        guard let peer = AgentPeer.of(socket: fd) else {
            log("refused a connection whose peer the kernel would not name: \(String(cString: strerror(errno)))")
            close(fd)
            return
        }
        // Root may connect as it may read the keychain anyway; any other user is refused before
        // a byte is read, whatever the socket's modes (a socket handed over by systemd, a folder
        // someone loosened).
        guard peer.uid == geteuid() || peer.uid == 0 else {
            log("refused a connection from uid \(peer.uid) (pid \(peer.pid)): not this agent's user")
            close(fd)
            return
        }
        let admitted = locked {
            guard connections < maximumConnections else { return false }
            connections += 1
            return true
        }
        guard admitted else {
            log("refused a connection from pid \(peer.pid): \(maximumConnections) connections already open")
            close(fd)
            return
        }
        let connection = Connection(descriptor: fd, handler: makeHandler(peer), server: self)
        if !Connection.start(connection) {
            log("refused a connection from pid \(peer.pid): no thread for it")
            close(fd)
            finished()
        }
    }

    fileprivate func finished() { locked { connections -= 1 } }

    fileprivate func note(_ line: String) { log(line) }

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }
}

/// One client's connection, served on a thread of its own until the client closes, sends a frame
/// over the limit, or its handler answers nil.
private final class Connection {
    let descriptor: Int32
    let handler: AgentServer.Handler
    let server: AgentServer

    init(descriptor: Int32, handler: @escaping AgentServer.Handler, server: AgentServer) {
        self.descriptor = descriptor
        self.handler = handler
        self.server = server
    }

    static func start(_ connection: Connection) -> Bool {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let context = Unmanaged.passRetained(connection).toOpaque()
        var thread = pthread_t()
        _ = clinux_block_termination(1)
        defer { _ = clinux_block_termination(0) }
        let started = pthread_create(
            &thread, &attributes,
            { context in
                let connection = Unmanaged<Connection>.fromOpaque(context!).takeRetainedValue()
                connection.serve()
                return nil
            }, context)
        if started != 0 { Unmanaged<Connection>.fromOpaque(context).release() }
        return started == 0
    }

    private func serve() {
        defer {
            close(descriptor)
            server.finished()
        }
        while true {
            guard let header = read(exactly: 4) else { return }
            let length = header.reduce(0) { $0 << 8 | Int($1) }
            guard length <= AgentServer.maximumMessage else {
                return server.note("closed a connection that sent a message of \(length) bytes (limit \(AgentServer.maximumMessage))")
            }
            guard var message = read(exactly: length) else { return }
            let answer = handler(message)
            message.wipe()
            guard var answer else { return }
            let count = UInt32(answer.count)
            var frame: Bytes = [UInt8(count >> 24), UInt8(count >> 16 & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff)]
            frame += answer
            answer.wipe()
            let sent = write(frame)
            frame.wipe()
            guard sent else { return }
        }
    }

    /// nil at end of file or an error; at most `count` bytes are ever held, so a client that
    /// sends less than it announced holds its thread, not memory.
    private func read(exactly count: Int) -> Bytes? {
        var buffer = Bytes(repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + done, count - done) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else {
                buffer.wipe()
                return nil
            }
            done += got
        }
        return buffer
    }

    private func write(_ bytes: Bytes) -> Bool {
        var done = 0
        while done < bytes.count {
            let sent = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { return false }
            done += sent
        }
        return true
    }
}
