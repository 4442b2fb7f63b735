import Glibc
import KeychainCore
import SecretServiceBus
import SessionBus

/// enable's part for SSH: once the keychain's agent (keychain-ssh-agent.socket) is enabled for
/// the user, gnome-keyring's, gcr's and OpenSSH's SSH agents are kept from starting for this
/// user, so that they do not set SSH_AUTH_SOCK over it; disable gives them back (the same state
/// file records what was written). A user who has not enabled the agent keeps theirs untouched.
extension Takeover {
    static let sshAgentSocketUnit = "keychain-ssh-agent.socket"

    /// An agent that systemd's user manager starts from sockets.target, whose socket unit sets
    /// SSH_AUTH_SOCK for every user service and the graphical session (`ExecStartPost=systemctl
    /// --user set-environment`), over what the environment generator says.
    struct SessionAgent {
        /// Its units, the socket first: the agent is there when its socket unit is.
        let units: [String]
        /// Its socket under $XDG_RUNTIME_DIR, as it sets SSH_AUTH_SOCK.
        let socket: String
    }

    static let sessionAgents = [
        // gcr 3.41+'s (GNOME 43+; gcr4's on Debian 13).
        SessionAgent(units: ["gcr-ssh-agent.socket", "gcr-ssh-agent.service"], socket: "gcr/ssh"),
        // OpenSSH's own (Debian 13's openssh-client). Debian 12's ssh-agent.service, an X
        // session's agent without a socket unit, is not this one and is left alone.
        SessionAgent(units: ["ssh-agent.socket", "ssh-agent.service"], socket: "openssh_agent")
    ]

    /// The units of the session agents installed here: those enable masks and status shows.
    static var sessionAgentUnits: [[String]] {
        sessionAgents.filter { unitFile($0.units[0]) != nil }.map { agent in agent.units.filter { unitFile($0) != nil } }
    }
    /// gnome-keyring's own SSH component before gcr took it over (an XDG autostart entry).
    static var sshAutostartFile: String { configHome + "/autostart/gnome-keyring-ssh.desktop" }

    /// As `systemctl --user enable` leaves it: the user's own wants link, or a machine-wide one
    /// (`systemctl --global enable`) the user has not masked. The same rule as pam_keychain's and
    /// the environment generator's, which set SSH_AUTH_SOCK to it.
    static func sshAgentEnabled() -> Bool {
        let wants = "sockets.target.wants/" + sshAgentSocketUnit
        if ProcFile.link(userUnitFolder + "/" + wants) != nil { return true }
        if ProcFile.link(userUnitFolder + "/" + sshAgentSocketUnit) == "/dev/null" { return false }
        return systemUnitFolders().contains { ProcFile.link($0 + "/" + wants) != nil }
    }

    static func sshAutostartContents() -> String {
        """
        [Desktop Entry]
        Type=Application
        Name=SSH Key Agent (gnome-keyring)
        Comment=Hidden by keychain-secret-service enable: keychain-ssh-agent is the SSH agent; `keychain-secret-service disable` removes this file
        Exec=/usr/bin/gnome-keyring-daemon --start --components=ssh
        Hidden=true

        """
    }

    /// Masks gcr's agent (stopping it where the user manager runs, recorded so that disable starts
    /// it again) and hides gnome-keyring's SSH autostart entry.
    func takeOverSSHAgent(manager: Bool, state: inout State) {
        guard Self.sshAgentEnabled() else {
            if !Self.sessionAgentUnits.isEmpty || KeychainFile.exists("/etc/xdg/autostart/gnome-keyring-ssh.desktop") {
                print(
                    "\(Self.sshAgentSocketUnit) is not enabled for you: gnome-keyring's SSH agent is left as it is (`systemctl --user enable --now \(Self.sshAgentSocketUnit)`, then enable again)"
                )
            }
            return
        }
        writeFile(Self.sshAutostartFile, Self.sshAutostartContents(), what: "the autostart override hiding gnome-keyring's SSH agent", state: &state)
        for agent in Self.sessionAgents {
            let present = agent.units.filter { Self.unitFile($0) != nil }
            guard present.first == agent.units[0] else { continue }
            if manager, Self.unitsActive(present), let result = Spawn.run(["systemctl", "--user", "stop"] + present), result.status == 0 {
                state.records.append(.stopped(components: present.joined(separator: ","), how: "units"))
                print("stopped \(present.joined(separator: " and "))")
                Self.forgetAgentSocket(agent)
            }
            for unit in present {
                link(Self.userUnitFolder + "/" + unit, to: "/dev/null", what: "\(unit) masked", manager: manager, systemctl: ["mask", unit], state: &state)
            }
        }
    }

    /// The user manager's SSH_AUTH_SOCK unset where it still names a stopped agent's socket (gcr's
    /// unit sets it and never unsets it), so that the environment generator's, the keychain's,
    /// is what user services get from the next daemon-reload on.
    static func forgetAgentSocket(_ agent: SessionAgent) {
        guard let runtime = KeychainFile.environment("XDG_RUNTIME_DIR"),
            let shown = Spawn.run(["systemctl", "--user", "show-environment"]), shown.status == 0,
            shown.output.split(separator: "\n").contains(where: { $0 == "SSH_AUTH_SOCK=\(runtime)/\(agent.socket)" })
        else { return }
        _ = Spawn.run(["systemctl", "--user", "unset-environment", "SSH_AUTH_SOCK"])
    }

    static func unitsActive(_ units: [String]) -> Bool {
        Spawn.run(["systemctl", "--user", "is-active", "--quiet"] + units)?.status == 0
    }

    /// status's lines for SSH: whether the keychain's agent is the user's, and gnome-keyring's,
    /// gcr's and OpenSSH's agents as enable left them (`origin` says by enable or the user's own).
    static func printSSHStatus(origin: (String) -> String) {
        print("  \(sshAgentSocketUnit): \(sshAgentEnabled() ? "enabled" : unitFile(sshAgentSocketUnit) == nil ? "not installed" : "not enabled")")
        for unit in sessionAgentUnits.joined() {
            let path = userUnitFolder + "/" + unit
            print("  \(unit): " + (ProcFile.link(path) == "/dev/null" ? "masked (\(path), \(origin(path)))" : "not masked"))
        }
        var st = stat()
        if lstat(sshAutostartFile, &st) == 0 {
            print("  gnome-keyring's SSH autostart: overridden (\(sshAutostartFile), \(origin(sshAutostartFile)))")
        }
    }
}
