import Glibc
import KeychainPeers

/// Whether the process that made a bus connection may be taken for the one sending on it.
///
/// The bus names the process that connected (BusPeer), but a connection is a socket, and whoever
/// holds its descriptor sends on it: a process that connects, forks, and execs a program an item
/// trusts leaves its child asking as that program. No socket option ties a unique name to one
/// descriptor, so the process is taken only when what the kernel shows fits it alone: it holds a
/// socket connected to this bus, and no other process holds any of its bus sockets. One that
/// connected, then exec'd a program which opened a connection of its own, still passes: which of
/// the bus daemon's sockets is which unique name, the bus does not say.
package enum ConnectionHolders {
    /// What an exec changes in a process, read when it was found to hold its connection alone: a
    /// later exec (another program behind the same pidfd) makes it differ.
    package struct ExecStamp: Equatable {
        var device: UInt64
        var inode: UInt64
        /// Fields 28 and 48 of /proc/PID/stat (the stack's start, the arguments' address): laid out
        /// anew, at random, by every exec, even of the same executable; 0 for an undumpable process.
        var stackStart: [UInt8]
        var argumentsStart: [UInt8]

        /// `process`'s now; nil once it was reaped (the reads may then be of another process).
        package init?(of process: PinnedProcess) {
            var info = stat()
            // From field 3 (the state) on.
            guard stat("/proc/\(process.pid)/exe", &info) == 0, let fields = ProcessLineage.statFields(of: process.pid), fields.count > 45,
                process.isAlive
            else { return nil }
            (device, inode) = (UInt64(info.st_dev), UInt64(info.st_ino))
            (stackStart, argumentsStart) = (Array(fields[25]), Array(fields[45]))
        }
    }

    /// `process`'s exec stamp when it holds a socket connected to the bus that `connection` (this
    /// program's own bus socket) is on, and no other process readable here holds any of its bus
    /// sockets; nil when either cannot be told.
    package static func soleHolder(_ process: PinnedProcess, busConnection connection: Int32) -> ExecStamp? {
        guard let stamp = ExecStamp(of: process) else { return nil }
        var own = stat()
        guard fstat(connection, &own) == 0, let table = UnixSockets.table() else { return nil }
        // The bus daemon's sockets all carry the address it listens on (accepted ones inherit it).
        guard let daemonEnd = table[UInt32(truncatingIfNeeded: own.st_ino)]?.peer, let address = table[daemonEnd]?.name,
            !address.isEmpty
        else { return nil }
        let daemonSockets = Set(table.compactMap { $0.value.name == address ? $0.key : nil })
        guard let held = socketDescriptors(of: process.pid) else { return nil }
        let busSockets = Set(held.values.filter { table[$0]?.peer.map(daemonSockets.contains) == true })
        guard !busSockets.isEmpty, closedOnExec(busSockets, of: held, in: process.pid), process.isAlive else { return nil }
        let uid = getuid()
        guard let proc = opendir("/proc") else { return nil }
        defer { closedir(proc) }
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = Int32(name), pid != process.pid else { continue }
            var owner = stat()
            guard stat("/proc/\(pid)", &owner) == 0, owner.st_uid == uid else { continue }
            if let others = socketInodes(of: pid), !others.isDisjoint(with: busSockets) { return nil }
        }
        return stamp
    }

    /// Whether each of `pid`'s descriptors of `sockets` is close-on-exec. Only a descriptor
    /// without the flag outlives an exec, which is how a process would hand its connection to the
    /// program it becomes while a child of its own, unreadable here (undumpable), sends on it;
    /// the bus libraries open and receive theirs close-on-exec.
    /// `held`: `pid`'s sockets by descriptor (`socketDescriptors`).
    static func closedOnExec(_ sockets: Set<UInt32>, of held: [Int32: UInt32], in pid: Int32) -> Bool {
        for (descriptor, inode) in held where sockets.contains(inode) {
            guard let info = ProcFiles.read("/proc/\(pid)/fdinfo/\(descriptor)", limit: 4096) else { return false }
            // "flags:\t02000002": octal, O_CLOEXEC is 02000000.
            let text = String(decoding: info, as: UTF8.self)
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("flags:") }),
                let flags = Int(line.dropFirst("flags:".count).drop { $0 == "\t" || $0 == " " }, radix: 8), flags & 0o2_000_000 != 0
            else { return false }
        }
        return true
    }

    /// The inodes of the sockets `pid` holds; nil when its descriptors cannot be read.
    static func socketInodes(of pid: Int32) -> Set<UInt32>? {
        socketDescriptors(of: pid).map { Set($0.values) }
    }

    /// The sockets `pid` holds, by descriptor; nil when its descriptors cannot be read. Read with
    /// readlinkat and no strings: the scan of every process's descriptors is the check's cost.
    static func socketDescriptors(of pid: Int32) -> [Int32: UInt32]? {
        guard let dir = opendir("/proc/\(pid)/fd") else { return nil }
        defer { closedir(dir) }
        let folder = dirfd(dir)
        var inodes: [Int32: UInt32] = [:]
        var target = [CChar](repeating: 0, count: 32)
        let prefix = "socket:[".utf8.map { CChar(bitPattern: $0) }
        while let entry = readdir(dir) {
            guard entry.pointee.d_type == UInt8(DT_LNK) else { continue }
            let count = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { name in
                    target.withUnsafeMutableBufferPointer { readlinkat(folder, name, $0.baseAddress!, $0.count) }
                }
            }
            // "socket:[INODE]"
            guard count > prefix.count + 1, count < target.count, target[count - 1] == CChar(bitPattern: UInt8(ascii: "]")),
                target[0..<prefix.count].elementsEqual(prefix)
            else { continue }
            var inode: UInt32 = 0
            var valid = true
            for byte in target[prefix.count..<(count - 1)].lazy.map(UInt8.init(bitPattern:)) {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else {
                    valid = false
                    break
                }
                inode = inode &* 10 &+ UInt32(byte - UInt8(ascii: "0"))
            }
            let descriptor = withUnsafeBytes(of: entry.pointee.d_name) { Int32(String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)) }
            if valid, let descriptor { inodes[descriptor] = inode }
        }
        return inodes
    }
}
