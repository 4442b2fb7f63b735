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

    /// The password an earlier module collected, if any; this module never prompts. A copy the
    /// caller wipes after use.
    func secret(_ item: Int32) -> [UInt8]? {
        var value: UnsafeRawPointer?
        guard pam_get_item(raw, item, &value) == PAM_SUCCESS, let value else { return nil }
        return Self.copy(value.assumingMemoryBound(to: CChar.self))
    }

    private static func copy(_ text: UnsafePointer<CChar>) -> [UInt8]? {
        let count = strlen(text)
        guard count > 0 else { return nil }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            memcpy(buffer.baseAddress!, text, count)
            initialized = count
        }
    }

    var user: String? { string(PAM_USER) }
    var service: String? { string(PAM_SERVICE) }
    var authToken: [UInt8]? { secret(PAM_AUTHTOK) }
    var oldAuthToken: [UInt8]? { secret(PAM_OLDAUTHTOK) }

    /// Keeps PAM_AUTHTOK and the user it was typed for, in C memory PAM's cleanup wipes.
    func stash() {
        let rc = pam_keychain_stash(raw)
        if rc == PAM_IGNORE {
            debug("authenticate: no password from an earlier module")
        } else if rc != PAM_SUCCESS {
            log(LOG_WARNING, "cannot keep the password for the session (\(rc))")
        }
    }

    /// The stashed password, a copy the caller wipes, only while PAM_USER is still the user who
    /// typed it: sudo authenticates the invoking user, then opens the target user's session.
    var stashed: [UInt8]? {
        var forOtherUser: Int32 = 0
        let token = pam_keychain_stashed(raw, &forOtherUser)
        if forOtherUser != 0 {
            log(LOG_NOTICE, "the password was typed for another user (sudo -u?); not used for \(user ?? "nobody")")
        }
        return token.flatMap(Self.copy)
    }

    func unstash() { pam_keychain_unstash(raw) }
}
