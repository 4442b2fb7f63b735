internal import Glibc

/// The agent's listening socket: made 0600 in a folder only its user can enter, or inherited from
/// systemd's socket activation.
package struct AgentSocket {
    package let descriptor: Int32
    /// The path this process bound, which it removes when it stops; nil for an inherited socket.
    package let path: String?

    /// The folder that holds the socket must keep other users out: any user who can write to it
    /// could put their own socket in its place and receive the keys `ssh-add` sends. `strict`
    /// (the keychain's own folder, the temporary folder this process made) wants exactly 0700 and
    /// this user; otherwise (`-a`, a path the caller chose, as ssh-agent allows /tmp/x) a folder
    /// of this user or root that others cannot write, or one with the sticky bit.
    package static func checkFolder(_ folder: String, strict: Bool) throws {
        var info = stat()
        guard lstat(folder, &info) == 0 else { throw AgentServerError("\(folder): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw AgentServerError("\(folder): not a folder") }
        let me = geteuid()
        let mode = info.st_mode & 0o7777
        if strict {
            guard info.st_uid == me else { throw AgentServerError("\(folder): owned by uid \(info.st_uid), not \(me)") }
            guard mode & 0o077 == 0 else { throw AgentServerError("\(folder): mode \(String(mode, radix: 8)), want 0700") }
        } else {
            guard info.st_uid == me || info.st_uid == 0 else { throw AgentServerError("\(folder): owned by uid \(info.st_uid)") }
            guard mode & 0o022 == 0 || mode & S_ISVTX != 0 else { throw AgentServerError("\(folder): writable by others") }
        }
    }

    /// Makes `folder` (its parent must exist) 0700 when it is missing, then checks it strictly.
    package static func makePrivateFolder(_ folder: String) throws {
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            throw AgentServerError("\(folder): \(String(cString: strerror(errno)))")
        }
        try checkFolder(folder, strict: true)
    }

    /// Binds and listens at `path`. `replaceStale`: a socket left by an agent that died (nothing
    /// answers at it) is removed first; a live one is an error, as is any other file.
    package static func listen(at path: String, strictFolder: Bool, replaceStale: Bool) throws -> AgentSocket {
        try checkFolder(parent(of: path), strict: strictFolder)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let raw = Array(path.utf8)
        guard raw.count < MemoryLayout.size(ofValue: address.sun_path) else { throw AgentServerError("\(path): too long for a socket") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: raw) }
        if replaceStale { try removeStale(path, address: address) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw AgentServerError("socket: \(String(cString: strerror(errno)))") }
        // 0600 from birth: a chmod after bind would leave a moment where others may connect.
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        let bindError = errno
        umask(previous)
        guard bound == 0 else {
            close(fd)
            throw AgentServerError("\(path): \(String(cString: strerror(bindError)))")
        }
        guard Glibc.listen(fd, 128) == 0 else {
            let listenError = errno
            close(fd)
            unlink(path)
            throw AgentServerError("listen: \(String(cString: strerror(listenError)))")
        }
        return AgentSocket(descriptor: fd, path: path)
    }

    /// systemd's socket activation (sd_listen_fds(3) without libsystemd): LISTEN_PID names this
    /// process and LISTEN_FDS is 1, the socket being descriptor 3. nil when not activated. The
    /// variables are removed so that a program the agent starts does not take the socket for its own.
    package static func inherited() throws -> AgentSocket? {
        guard let pidText = getenv("LISTEN_PID").map({ String(cString: $0) }),
            let countText = getenv("LISTEN_FDS").map({ String(cString: $0) })
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        guard Int32(pidText) == getpid() else { return nil }
        guard countText == "1" else { throw AgentServerError("LISTEN_FDS=\(countText): want one socket") }
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == Int32(SOCK_STREAM.rawValue) else {
            throw AgentServerError("LISTEN_FDS set but descriptor 3 is not a stream socket")
        }
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        return AgentSocket(descriptor: 3, path: nil)
    }

    package static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func removeStale(_ path: String, address: sockaddr_un) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFSOCK else { throw AgentServerError("\(path): exists and is not a socket") }
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return }
        defer { close(probe) }
        var target = address
        let answered = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard answered != 0 else { throw AgentServerError("\(path): an agent already answers there") }
        unlink(path)
    }
}
