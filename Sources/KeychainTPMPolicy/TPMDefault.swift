import Glibc
import KeychainCore

/// Whether new keychains are sealed to the TPM when they are made (`security create-keychain`
/// without --tpm or --no-tpm, and pam_keychain's auto_create at a first login): the user's choice
/// (`security tpm-enroll --default on|off`, kept in $XDG_CONFIG_HOME/keychain/tpm-enroll), else
/// the machine's (/etc/keychain/tpm-enroll, written by an administrator), else off. Each file holds
/// one word, "on" or "off"; anything else counts as not set.
package enum TPMEnrolDefault {
    /// The machine-wide default an administrator sets.
    package static let machineFile = "/etc/keychain/tpm-enroll"

    /// Where `security tpm-enroll --default` keeps the user's choice.
    package static func userFile() -> String {
        let config = KeychainFile.environment("XDG_CONFIG_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? KeychainFile.homeDirectory() + "/.config"
        return config + "/keychain/tpm-enroll"
    }

    /// The user's choice, nil when none was made.
    package static func user() -> Bool? { parse(KeychainFile.readSmallFile(userFile())) }

    /// The machine's default, nil when the administrator set none.
    package static func machine(file: String = machineFile) -> Bool? { parse(KeychainFile.readSmallFile(file)) }

    /// Whether a new keychain is sealed when nothing else is said.
    package static var effective: Bool { effective(machineFile: machineFile) }

    static func effective(machineFile: String) -> Bool { user() ?? machine(file: machineFile) ?? false }

    static func parse(_ text: String?) -> Bool? {
        switch text {
        case "on": return true
        case "off": return false
        default: return nil
        }
    }

    /// Records the user's choice; nil removes it (the machine's default applies again).
    package static func set(_ on: Bool?) throws {
        let file = userFile()
        guard let on else {
            guard unlink(file) == 0 || errno == ENOENT else {
                throw KeychainError(.io, "cannot remove \(file): \(String(cString: strerror(errno)))")
            }
            return
        }
        try KeychainFile.prepareDirectory(for: file)
        let temporary = file + ".tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeychainError(.io, "cannot write \(file): \(String(cString: strerror(errno)))") }
        let bytes = Array((on ? "on\n" : "off\n").utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temporary, file) == 0 else {
            unlink(temporary)
            throw KeychainError(.io, "cannot write \(file)")
        }
    }
}

/// A keychain sealed where nobody could be shown its recovery key (pam_keychain's first login):
/// marked by a hidden ThisDeviceOnly item, so that `security tpm-status` says so.
extension KeychainStore {
    package var recoveryKeyUnshown: Bool { ((try? hiddenSecret("tpm-recovery-unshown")) ?? nil) == [1] }

    package func setRecoveryKeyUnshown(_ on: Bool) throws {
        if on { try setHiddenSecret("tpm-recovery-unshown", [1]) } else { try removeHiddenSecret("tpm-recovery-unshown") }
    }
}
