import Glibc
import KeychainSSH

/// The socket the options ask for, and the temporary folder made for it (removed at exit).
func openSocket(_ choice: AgentOptions.SocketChoice, command: [String], launcherPid: pid_t) throws -> (AgentSocket, String?) {
    switch choice {
    case .systemd:
        guard let inherited = try AgentSocket.inherited() else { throw AgentServerError("--systemd: no socket from systemd (LISTEN_PID/LISTEN_FDS)") }
        return (inherited, nil)
    case .path(let path):
        return (try AgentSocket.listen(at: path, strictFolder: false, replaceStale: false), nil)
    case .user:
        guard let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") else {
            throw AgentServerError("--user-socket: XDG_RUNTIME_DIR is not set")
        }
        try AgentSocket.makePrivateFolder(runtime + "/keychain")
        return (try AgentSocket.listen(at: runtime + "/keychain/ssh-agent.socket", strictFolder: true, replaceStale: true), nil)
    case .temporary:
        // Socket activation is detected as ssh-agent 10 does: only when nothing else was asked for.
        if command.isEmpty, let inherited = try AgentSocket.inherited() { return (inherited, nil) }
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        let folder = try makeTemporaryFolder(in: base)
        do {
            return (try AgentSocket.listen(at: "\(folder)/agent.\(launcherPid)", strictFolder: true, replaceStale: false), folder)
        } catch {
            rmdir(folder)
            throw error
        }
    }
}

func killAgent(shell: AgentOptions.Shell) -> Never {
    guard let text = getenv("SSH_AGENT_PID").map({ String(cString: $0) }) else {
        fputs("SSH_AGENT_PID not set, cannot kill agent\n", stderr)
        exit(1)
    }
    guard let pid = Int32(text), pid >= 2 else {
        fputs("SSH_AGENT_PID=\"\(text)\", which is not a good PID: invalid\n", stderr)
        exit(1)
    }
    guard kill(pid, SIGTERM) == 0 else {
        perror("kill")
        exit(1)
    }
    print(ShellOutput.unset("SSH_AUTH_SOCK", shell), terminator: "")
    print(ShellOutput.unset("SSH_AGENT_PID", shell), terminator: "")
    print("echo Agent pid \(pid) killed;")
    exit(0)
}

@Sendable func logToStandardError(_ line: String) { fputs("keychain-ssh-agent: \(line)\n", stderr) }

@Sendable func logToSyslog(_ line: String) {
    line.withCString { text in
        withVaList([text]) { vsyslog(LOG_AUTH | LOG_INFO, "%s", $0) }
    }
}

/// ssh-agent's folder: ssh-XXXXXXXXXXXX under TMPDIR, twelve random letters and digits (glibc's
/// mkdtemp would fill only the last six), made 0700 and never an existing one.
func makeTemporaryFolder(in base: String) throws -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
    var generator = SystemRandomNumberGenerator()
    for _ in 0..<100 {
        let name = String((0..<12).map { _ in alphabet[Int(generator.next(upperBound: UInt32(alphabet.count)))] })
        let folder = "\(base)/ssh-\(name)"
        if mkdir(folder, 0o700) == 0 { return folder }
        guard errno == EEXIST else { break }
    }
    throw AgentServerError("mkdtemp: private socket dir: \(String(cString: strerror(errno)))")
}
