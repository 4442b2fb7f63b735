internal import CLinux
import Glibc

/// Where this machine's TPM 2.0 is reached, if anywhere.
package struct TPMConfiguration: Sendable, Equatable {
    /// A tpm2-tss TCTI configuration ("device:/dev/tpmrm0", "swtpm:host=127.0.0.1,port=2321");
    /// nil when there is no TPM to use.
    package var tcti: String?
    /// Why there is none (one line, for status output); empty when there is one.
    package var absence: String
    /// Where keychain-tpm-helper is, when not in its usual places (pam_keychain's `tpm_helper=`,
    /// set by the administrator); it must pass the same checks.
    package var helper: String? = nil
    /// The boot event log, read beforehand by a process that may (pam_keychain, as root, for its
    /// workers, which run as the user and cannot read the kernel's copy); nil: read when needed.
    package var bootLog: Bytes? = nil

    package static let environmentVariable = "KEYCHAIN_TPM_TCTI"
    /// The kernel's resource manager: it flushes whatever a process left behind, and lets several
    /// processes share the TPM.
    package static let kernelDevice = "/dev/tpmrm0"

    package init(tcti: String?, absence: String = "") {
        self.tcti = tcti
        self.absence = tcti == nil && absence.isEmpty ? "no TPM" : absence
    }

    /// $KEYCHAIN_TPM_TCTI when set ("none" or empty: no TPM; ignored in set-user-ID processes),
    /// else the kernel's resource manager when the device exists. Never tpm2-tss's own default,
    /// which falls back to TCP ports on localhost, where any local user could answer as a TPM.
    package static var current: TPMConfiguration {
        if let raw = clinux_secure_getenv(environmentVariable) {
            let value = String(cString: raw)
            if value.isEmpty || value == "none" {
                return TPMConfiguration(tcti: nil, absence: "no TPM ($\(environmentVariable) is \(value.isEmpty ? "empty" : "none"))")
            }
            return TPMConfiguration(tcti: value)
        }
        var st = stat()
        guard stat(kernelDevice, &st) == 0 else {
            return TPMConfiguration(tcti: nil, absence: "no TPM (\(kernelDevice) does not exist)")
        }
        return TPMConfiguration(tcti: "device:" + kernelDevice)
    }
}

/// Why the TPM did not do what was asked.
package enum TPMFailure: Error, Equatable {
    /// No TPM here: none configured, tpm2-tss not installed, or the TCTI cannot connect.
    case unavailable(String)
    /// TPM_RC_AUTH_FAIL: the authorization did not match; the TPM counted it (its count after,
    /// when it could be read).
    case authorization(TPMLockoutState?)
    /// TPM_RC_LOCKOUT: the TPM refuses every authorization of DA-protected objects for now.
    case lockout(TPMLockoutState?)
    /// The sealed object, or the primary key it hangs under, is not this TPM's.
    case foreign(String)
    /// The TPM refused, or answered something that cannot be used.
    case failed(String)
    /// TPM_RC_POLICY_FAIL on an object sealed to PCR values: this machine's boot state is not
    /// the one it was sealed to (another boot chain, a firmware or Secure Boot change).
    case bootState(String)
}

/// The TPM's dictionary-attack state (TPM2_GetCapability, TPM_PT_PERMANENT and TPM_PT_LOCKOUT_*).
package struct TPMLockoutState: Sendable, Equatable {
    package var inLockout: Bool
    /// Failed authorizations counted so far (TPM_PT_LOCKOUT_COUNTER).
    package var failures: UInt32
    /// The count at which the TPM locks out (TPM_PT_MAX_AUTH_FAIL).
    package var maximum: UInt32
    /// Seconds after which one counted failure is forgotten (TPM_PT_LOCKOUT_INTERVAL).
    package var interval: UInt32
    /// TPMA_PERMANENT as the TPM reported it: which hierarchies have an authorization value.
    package var permanent: UInt32

    package init(inLockout: Bool, failures: UInt32, maximum: UInt32, interval: UInt32, permanent: UInt32 = 0) {
        self.inLockout = inLockout
        self.failures = failures
        self.maximum = maximum
        self.interval = interval
        self.permanent = permanent
    }

    /// Someone set the owner hierarchy's authorization: the keychain's storage key, made under it
    /// without one, cannot be made until it is removed.
    package var ownerAuthorizationSet: Bool { permanent & 0x1 != 0 }
    /// The lockout authorization is set: without it (Linux's default) anyone who can reach the TPM
    /// can clear it (TPM2_Clear), and with it every keychain's sealed secret.
    package var lockoutAuthorizationSet: Bool { permanent & 0x4 != 0 }
    /// TPM2_Clear through the lockout authorization is turned off (TPM2_ClearControl).
    package var clearDisabled: Bool { permanent & 0x100 != 0 }
}

/// What `security tpm-status` shows of the TPM itself.
package struct TPMDescription: Sendable, Equatable {
    package var tcti: String
    /// TPM_PT_MANUFACTURER as its four ASCII letters ("IBM " for swtpm).
    package var manufacturer: String
    package var lockout: TPMLockoutState?

    package init(tcti: String, manufacturer: String, lockout: TPMLockoutState?) {
        self.tcti = tcti
        self.manufacturer = manufacturer
        self.lockout = lockout
    }
}
