import Glibc
import KeychainCore

/// What a credential helper needs of the keychain: the user's default keychain with keys from
/// the kernel, and one line on stderr when it cannot serve (never a prompt, never a hang).
package enum HelperKeychain {
    package static func open() throws -> KeychainStore {
        try KeychainStore.open(at: nil, storage: .kernel)
    }

    /// The one line a helper prints when the keychain cannot serve it.
    package static func explain(_ error: Error, helper: String) -> String {
        guard let error = error as? KeychainError else { return "\(helper): \(error)" }
        switch error.code {
        case .interactionNotAllowed where error.concernsPresence:
            return "\(helper): \(error.detail)"
        case .interactionNotAllowed:
            return "\(helper): the keychain is locked; \(Remedy.unlock)"
        case .noSuchKeychain, .notAvailable:
            return "\(helper): \(KeychainError.noKeychain(at: KeychainFile.defaultPath()).detail)"
        default:
            return "\(helper): \(error.description) (\(KeychainError.name(for: error.status)))"
        }
    }

    package static func printError(_ line: String) {
        fputs(line + "\n", stderr)
    }
}

extension Item {
    package var modificationTime: Double {
        if case .date(let d)? = self[AttributeKey.modificationDate] { return d }
        return 0
    }
}
