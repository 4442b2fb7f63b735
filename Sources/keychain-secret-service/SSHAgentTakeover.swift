import Glibc
import KeychainCore

/// enable's part for SSH: once the keychain's agent (keychain-ssh-agent.socket) is enabled for
/// the user, gnome-keyring's and gcr's SSH agents are kept from starting for this user, so that
/// they do not set SSH_AUTH_SOCK over it; disable gives them back (the same state file records
/// what was written). A user who has not enabled the agent keeps theirs untouched.
extension Takeover {
    static let sshAgentSocketUnit = "keychain-ssh-agent.socket"
    /// gcr 3.41+'s agent (GNOME 43+), started by its socket from sockets.target.
    static let gcrSSHAgentUnits = ["gcr-ssh-agent.socket", "gcr-ssh-agent.service"]
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
            if Self.gcrSSHAgentUnits.contains(where: { Self.unitFile($0) != nil }) || KeychainFile.exists("/etc/xdg/autostart/gnome-keyring-ssh.desktop") {
                print(
                    "\(Self.sshAgentSocketUnit) is not enabled for you: gnome-keyring's SSH agent is left as it is (`systemctl --user enable --now \(Self.sshAgentSocketUnit)`, then enable again)"
                )
            }
            return
        }
        writeFile(Self.sshAutostartFile, Self.sshAutostartContents(), what: "the autostart override hiding gnome-keyring's SSH agent", state: &state)
        let present = Self.gcrSSHAgentUnits.filter { Self.unitFile($0) != nil }
        guard !present.isEmpty else { return }
        if manager, Self.unitsActive(present), let result = Spawn.run(["systemctl", "--user", "stop"] + present), result.status == 0 {
            state.records.append(.stopped(components: present.joined(separator: ","), how: "units"))
            print("stopped \(present.joined(separator: " and "))")
        }
        for unit in present {
            link(Self.userUnitFolder + "/" + unit, to: "/dev/null", what: "\(unit) masked", manager: manager, systemctl: ["mask", unit], state: &state)
        }
    }

    static func unitsActive(_ units: [String]) -> Bool {
        Spawn.run(["systemctl", "--user", "is-active", "--quiet"] + units)?.status == 0
    }

    /// status's lines for SSH: whether the keychain's agent is the user's, and gnome-keyring's and
    /// gcr's agents as enable left them (`origin` says by enable or the user's own).
    static func printSSHStatus(origin: (String) -> String) {
        print("  \(sshAgentSocketUnit): \(sshAgentEnabled() ? "enabled" : unitFile(sshAgentSocketUnit) == nil ? "not installed" : "not enabled")")
        for unit in gcrSSHAgentUnits where unitFile(unit) != nil {
            let path = userUnitFolder + "/" + unit
            print("  \(unit): " + (ProcFile.link(path) == "/dev/null" ? "masked (\(path), \(origin(path)))" : "not masked"))
        }
        var st = stat()
        if lstat(sshAutostartFile, &st) == 0 {
            print("  gnome-keyring's SSH autostart: overridden (\(sshAutostartFile), \(origin(sshAutostartFile)))")
        }
    }
}
