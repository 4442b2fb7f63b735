import CLinux
import Glibc
import KeychainSSH

// keychain-ssh-agent: the keychain's SSH agent, started as ssh-agent is (same options, same
// output) or by systemd's socket unit. The protocol itself is behind makeHandlerFactory.

setvbuf(stdout, nil, _IOLBF, 0)
let options: AgentOptions
do {
    options = try AgentOptions(arguments: Array(CommandLine.arguments.dropFirst()))
} catch let error as AgentOptions.UsageError {
    if let message = error.message { fputs("keychain-ssh-agent: \(message)\n", stderr) }
    if error.fatal { exit(255) }
    fputs(AgentOptions.usage + "\n", stderr)
    exit(1)
}
if options.help {
    print(AgentOptions.usage)
    exit(0)
}

let shell = ShellOutput.shell(chosen: options.shell, environment: getenv("SHELL").map { String(cString: $0) })
if options.kill { killAgent(shell: shell) }

// Keys live in this process's memory: no core file, no ptrace by other processes of the user.
_ = clinux_set_dumpable(0)
var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCore)
signal(SIGPIPE, SIG_IGN)
// A thread per connection would let glibc make up to 8 malloc arenas per core, each keeping the
// pages it touched (2.9 MiB private for 20 clients at once, 1.8 MiB with one arena); signing is
// not heap-bound, so one arena costs no time.
_ = clinux_limit_malloc_arenas(1)

let launcherPid = getpid()
let socket: AgentSocket
let temporaryFolder: String?
do {
    (socket, temporaryFolder) = try openSocket(options.socket, command: options.command, launcherPid: launcherPid)
} catch {
    fputs("keychain-ssh-agent: \(error)\n", stderr)
    exit(1)
}

let logToStderr = options.foreground || options.socket == .systemd || socket.path == nil
let log: @Sendable (String) -> Void = logToStderr ? logToStandardError : logToSyslog
if !logToStderr { openlog("keychain-ssh-agent", LOG_PID, LOG_AUTH) }

if options.foreground {
    if let path = socket.path {
        print(ShellOutput.export("SSH_AUTH_SOCK", path, shell), terminator: "")
        print("echo Agent pid \(launcherPid);")
    }
} else if socket.path != nil || !options.command.isEmpty {
    _ = Daemon.detach(socketPath: socket.path ?? "", shell: shell, command: options.command)
}

// ssh-agent's rule: an agent started for a command lives as long as that command (its parent).
let commandPid = options.command.isEmpty ? nil : getppid()
_ = clinux_catch_termination()
let server: AgentServer
do {
    server = try AgentServer(listening: socket.descriptor, log: log, handlerFactory: makeHandlerFactory(options.settings, log: log))
} catch {
    log("\(error)")
    exit(1)
}
server.run(checkInterval: commandPid == nil ? -1 : 2) { commandPid == nil || getppid() == commandPid }
if let path = socket.path { unlink(path) }
if let temporaryFolder { rmdir(temporaryFolder) }
exit(0)
