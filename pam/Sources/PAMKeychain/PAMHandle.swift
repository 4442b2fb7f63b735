import CPAM
import Glibc
import PAMKeychainShim

/// The PAM handle and the few items the module reads from it.
struct PAMHandle {
    let raw: OpaquePointer
    let options: Options

    func log(_ priority: Int32, _ message: String) {
        pam_keychain_log(raw, priority, message)
    }

    func debug(_ message: String) {
        if options.debug { log(LOG_DEBUG, message) }
    }

    func string(_ item: Int32) -> String? {
        var value: UnsafeRawPointer?
        guard pam_get_item(raw, item, &value) == PAM_SUCCESS, let value else { return nil }
        return String(cString: value.assumingMemoryBound(to: CChar.self))
    }

    /// The password an earlier module collected, if any; this module never prompts.
    func secret(_ item: Int32) -> [UInt8]? {
        var value: UnsafeRawPointer?
        guard pam_get_item(raw, item, &value) == PAM_SUCCESS, let value else { return nil }
        let bytes = Array(UnsafeBufferPointer(start: value.assumingMemoryBound(to: UInt8.self), count: strlen(value.assumingMemoryBound(to: CChar.self))))
        return bytes.isEmpty ? nil : bytes
    }

    var user: String? { string(PAM_USER) }
    var service: String? { string(PAM_SERVICE) }
    var authToken: [UInt8]? { secret(PAM_AUTHTOK) }
    var oldAuthToken: [UInt8]? { secret(PAM_OLDAUTHTOK) }

    func stash(_ token: [UInt8]) {
        var copy = token.map { CChar(bitPattern: $0) } + [0]
        let rc = pam_keychain_stash(raw, copy)
        for i in copy.indices { copy[i] = 0 }
        if rc != PAM_SUCCESS { log(LOG_WARNING, "cannot keep the password for the session (\(rc))") }
    }

    var stashed: [UInt8]? {
        guard let p = pam_keychain_stashed(raw) else { return nil }
        let bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: strlen(p)))
        return bytes.isEmpty ? nil : bytes
    }

    func unstash() { pam_keychain_unstash(raw) }
}
