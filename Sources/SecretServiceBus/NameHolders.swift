import CSDBus
import Glibc
import SessionBus

/// What frees org.freedesktop.secrets from the provider holding it, said the same way by
/// `--replace` and by `enable`. gnome-keyring-daemon, KeePassXC and kwalletd all ask for the name
/// without allowing replacement (Qt's QDBusConnection::registerService, gnome-keyring's
/// g_bus_own_name without the flag), so no `--replace` takes it from them: the holder must stop
/// serving it. gnome-keyring is stopped by enable; KeePassXC only by its user; kwalletd by enable,
/// which keeps it out of the Secret Service from then on (kwalletrc).
package enum NameHolder {
    case gnomeKeyring, keePassXC, kwallet, other

    package init(command: String, executable: String? = nil) {
        let program = executable.map { String($0.split(separator: "/").last ?? "") } ?? command
        if command.hasPrefix("gnome-keyring-d") || program == "gnome-keyring-daemon" {
            self = .gnomeKeyring
        } else if command.lowercased().hasPrefix("keepassxc") || program.lowercased().hasPrefix("keepassxc") {
            self = .keePassXC
        } else if command.hasPrefix("kwalletd") || program.hasPrefix("kwalletd") {
            self = .kwallet
        } else {
            self = .other
        }
    }

    /// What the user does to free the name, or nil for a provider whose rules are unknown.
    package var freeing: String? {
        switch self {
        case .gnomeKeyring:
            return "`keychain-secret-service enable` stops your gnome-keyring-daemon, its secrets imported first"
        case .keePassXC:
            return
                "turn off KeePassXC's Secret Service yourself (Tools > Settings > Secret Service Integration), then run `keychain-secret-service enable` again"
        case .kwallet:
            return
                "KWallet's Secret Service goes off with `[org.freedesktop.secrets] apiEnabled=false` in kwalletrc and kwalletd stopped: `keychain-secret-service enable` does both, its entries imported first"
        case .other:
            return nil
        }
    }
}

package extension NameHolder {
    /// The provider owning `name` on `bus`, as the bus daemon's credentials of it say.
    init(owning name: String, on bus: OpaquePointer) {
        var creds: OpaquePointer?
        var pid: pid_t = 0
        guard sd_bus_get_name_creds(bus, name, UInt64(SD_BUS_CREDS_PID | SD_BUS_CREDS_AUGMENT), &creds) >= 0, let creds else {
            self = .other
            return
        }
        defer { sd_bus_creds_unref(creds) }
        guard sd_bus_creds_get_pid(creds, &pid) >= 0, let command = ProcFile.programName(pid) else {
            self = .other
            return
        }
        self.init(command: command, executable: ProcFile.link("/proc/\(pid)/exe"))
    }

    /// The end of the line saying the name is taken: what the user can do.
    func nextStep(replace: Bool) -> String {
        guard let freeing else {
            return replace ? "it does not let another program take the name" : "run with --replace to take it over"
        }
        return "it does not let another program take the name: " + freeing
    }
}
