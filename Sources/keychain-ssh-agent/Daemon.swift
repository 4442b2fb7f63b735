import Glibc

/// ssh-agent's ways of running: in the foreground (-D, -d, systemd), or forked off with the parent
/// printing the variables and exiting, or the parent becoming the given command.
enum Daemon {
    /// Forks. In the parent, prints the variables (no command) or execs the command with them set;
    /// it never returns there. Returns in the child, which is the agent: a session of its own,
    /// in /, its standard descriptors on /dev/null.
    static func detach(socketPath: String, shell: AgentOptions.Shell, command: [String]) -> Never? {
        let child = fork()
        if child < 0 {
            perror("fork")
            exit(1)
        }
        if child > 0 {
            if command.isEmpty {
                print(ShellOutput.export("SSH_AUTH_SOCK", socketPath, shell), terminator: "")
                print(ShellOutput.export("SSH_AGENT_PID", "\(child)", shell), terminator: "")
                print("echo Agent pid \(child);")
                exit(0)
            }
            setenv("SSH_AUTH_SOCK", socketPath, 1)
            setenv("SSH_AGENT_PID", "\(child)", 1)
            var arguments = command.map { strdup($0) } + [nil]
            execvp(command[0], &arguments)
            perror(command[0])
            exit(1)
        }
        if setsid() < 0 { perror("setsid") }
        _ = chdir("/")
        let null = open("/dev/null", O_RDWR)
        if null >= 0 {
            for fd: Int32 in 0...2 { dup2(null, fd) }
            if null > 2 { close(null) }
        }
        return nil
    }
}
