internal import CLinux
import Glibc
import KeychainCore

/// A connection to a session bus that asks the bus daemon itself (org.freedesktop.DBus) a few
/// questions (who owns a name, that connection's credentials, to start a name's service), and
/// makes the one call to a service that the keychain makes without sd-bus: the desktop portal's
/// access dialog (`PortalAccessDialog`).
///
/// sd-bus and SessionBus's reading of credentials (`BusPeer`) are out of reach here:
/// KeychainPresence sits under SessionBus, and the tools it is linked into are static, which
/// libsystemd cannot be on Debian. So the wire is spoken directly, for the daemon's replies only:
/// EXTERNAL authentication with descriptor passing (dbus 1.15.8 and dbus-broker 34 send
/// ProcessFD, a pidfd), one call at a time, every read bounded by `deadline`.
final class BusDaemonConnection {
    struct Reply {
        var reader: BusReader
        var signature: String
        /// The error's name when the daemon answered with one.
        var error: String?
        /// The descriptors the reply carried, in order: the caller's to close.
        var descriptors: [Int32]
    }

    enum Failure: Error { case unreachable, malformed, timedOut }

    private let fd: Int32
    /// Every wait ends by then (the monotonic clock): moved on for a call that waits for a person.
    var deadline: Double
    /// This connection's unique name, from Hello.
    private(set) var uniqueName = ""
    private var serial: UInt32 = 0
    private var buffer: [UInt8] = []
    private var descriptors: [Int32] = []
    private static let messageLimit = 1 << 20

    /// Connects to the first `unix:` address of `address` (path or abstract) before `deadline`
    /// (the monotonic clock), authenticated as this process's uid, and says Hello.
    init(address: String, deadline: Double) throws {
        self.deadline = deadline
        guard let socketAddress = Self.unixAddress(address) else { throw Failure.unreachable }
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure.unreachable }
        // Thrown from here on, the object is whole: deinit closes the socket.
        guard Self.connect(fd, to: socketAddress) else { throw Failure.unreachable }
        let uid = Array(String(getuid()).utf8).map { String($0, radix: 16) }.joined()
        try send([0] + Array("AUTH EXTERNAL \(uid)\r\n".utf8))
        guard try line().hasPrefix("OK ") else { throw Failure.unreachable }
        try send(Array("NEGOTIATE_UNIX_FD\r\n".utf8))
        // A bus that will not pass descriptors answers ERROR: its credentials hold no pidfd.
        _ = try line()
        try send(Array("BEGIN\r\n".utf8))
        var hello = try call("Hello")
        hello.descriptors.forEach { close($0) }
        guard hello.error == nil, hello.signature == "s" else { throw Failure.malformed }
        uniqueName = try hello.reader.string()
    }

    deinit {
        if fd >= 0 { close(fd) }
        for descriptor in descriptors { close(descriptor) }
    }

    /// Calls `member` of org.freedesktop.DBus with `body` (of `signature`) and waits for its
    /// reply, passing over the daemon's signals (NameAcquired after Hello).
    func call(_ member: String, signature: String = "", body: [UInt8] = []) throws -> Reply {
        try call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: member,
            signature: signature, body: body)
    }

    /// Calls `member` of `interface` at `path` of `destination` and waits for its reply.
    func call(destination: String, path: String, interface: String, member: String, signature: String, body: [UInt8]) throws -> Reply {
        serial += 1
        let sent = serial
        try send(
            BusWriter.methodCall(
                serial: sent, destination: destination, path: path, interface: interface, member: member, signature: signature,
                body: body))
        while true {
            let (reply, header) = try message()
            // Only the callee's return or error: any connection on the bus may send this one a
            // message carrying a reply serial (review 56), which the bus passes on as it is.
            if header.replyTo == sent, header.type == 2 || header.type == 3, header.sender == destination { return reply }
            for descriptor in reply.descriptors { close(descriptor) }
        }
    }

    /// What a message's header says of where it comes from.
    struct Header {
        /// 1 a method call, 2 a method return, 3 an error, 4 a signal.
        var type: UInt8
        /// The serial it replies to (0 for none).
        var replyTo: UInt32
        /// The sending connection's unique name, or the bus daemon's (org.freedesktop.DBus).
        var sender: String?
    }

    /// The next whole message, and its header.
    private func message() throws -> (Reply, Header) {
        try fill(16)
        guard buffer[0] == UInt8(ascii: "l") || buffer[0] == UInt8(ascii: "B") else { throw Failure.malformed }
        var head = BusReader(Array(buffer[0..<16]), offset: 4, bigEndian: buffer[0] == UInt8(ascii: "B"))
        let bodyLength = Int(try head.uint32())
        _ = try head.uint32()
        let fieldsLength = Int(try head.uint32())
        guard bodyLength < Self.messageLimit, fieldsLength < Self.messageLimit else { throw Failure.malformed }
        let bodyStart = (16 + fieldsLength + 7) / 8 * 8
        try fill(bodyStart + bodyLength)
        let bytes = Array(buffer[0..<bodyStart + bodyLength])
        buffer.removeFirst(bodyStart + bodyLength)
        var fields = BusReader(bytes, offset: 16, bigEndian: head.bigEndian)
        var replyTo: UInt32 = 0, signature = "", error: String?, count = 0, sender: String?
        while fields.offset < 16 + fieldsLength {
            try fields.align(8)
            let code = try fields.byte()
            let type = try fields.signature()
            switch (code, type) {
            case (4, "s"): error = try fields.string()
            case (5, "u"): replyTo = try fields.uint32()
            case (7, "s"): sender = try fields.string()
            case (8, "g"): signature = try fields.signature()
            case (9, "u"): count = Int(try fields.uint32())
            default: try fields.skip(type[...])
            }
        }
        // The descriptors came with the message's first bytes: this message's are the oldest.
        guard count <= descriptors.count else { throw Failure.malformed }
        let carried = Array(descriptors.prefix(count))
        descriptors.removeFirst(count)
        let type = bytes[1]
        let reader = BusReader(bytes, offset: bodyStart, bigEndian: head.bigEndian)
        return (
            Reply(reader: reader, signature: signature, error: type == 3 ? (error ?? "") : nil, descriptors: carried),
            Header(type: type, replyTo: replyTo, sender: sender)
        )
    }

    /// Reads until `buffer` holds at least `count` bytes.
    private func fill(_ count: Int) throws {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while buffer.count < count {
            try wait(for: Int16(POLLIN))
            var sender: Int32 = -1, passed: Int32 = -1
            let n = clinux_receive_with_descriptor(fd, &chunk, chunk.count, &sender, &passed)
            if passed >= 0 { descriptors.append(passed) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw Failure.unreachable }
            buffer += chunk[0..<n]
        }
    }

    /// One line of the authentication's conversation, without its CR LF.
    private func line() throws -> String {
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let text = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 1)
                return text.hasSuffix("\r") ? String(text.dropLast()) : text
            }
            guard buffer.count < 4096 else { throw Failure.malformed }
            try fill(buffer.count + 1)
        }
    }

    private func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            try wait(for: Int16(POLLOUT))
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw Failure.unreachable }
            sent += n
        }
    }

    private func wait(for events: Int16) throws {
        while true {
            let left = Int32(max(0, (deadline - SystemClock.monotonic()) * 1000))
            guard left > 0 else { throw Failure.timedOut }
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&descriptor, 1, left)
            if ready > 0 { return }
            if ready < 0, errno == EINTR { continue }
            throw Failure.timedOut
        }
    }

    /// A D-Bus address's first `unix:` entry as a socket address: `path=` or `abstract=`, its
    /// %-escapes undone. The others (`tcp:`, `unixexec:`, …) are not used here.
    static func unixAddress(_ address: String) -> [UInt8]? {
        for entry in address.split(separator: ";") where entry.hasPrefix("unix:") {
            for pair in entry.dropFirst("unix:".count).split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, let value = unescape(parts[1]), !value.isEmpty, !value.contains(0) else { continue }
                if parts[0] == "path" { return value }
                if parts[0] == "abstract" { return [0] + value }
            }
        }
        return nil
    }

    private static func unescape(_ text: Substring) -> [UInt8]? {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let first = bytes.popFirst() {
            guard first == UInt8(ascii: "%") else {
                out.append(first)
                continue
            }
            guard bytes.count >= 2, let value = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            out.append(value)
            bytes = bytes.dropFirst(2)
        }
        return out
    }

    private static func connect(_ fd: Int32, to path: [UInt8]) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.enumerated() { raw[index] = byte }
        }
        // An abstract name is as long as it is; a path ends at its NUL.
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count + (path.first == 0 ? 0 : 1)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(length)) == 0 }
        }
    }
}
