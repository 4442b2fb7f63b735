/// Apple's LAPolicy, with Apple's raw values (LAPublicDefines.h).
public enum LAPolicy: Int, Sendable {
    /// A finger, through the presence authorizer.
    case deviceOwnerAuthenticationWithBiometrics = 1
    /// The user's password or a finger, as the presence authorizer decides.
    case deviceOwnerAuthentication = 2
    /// A paired watch: there is none on Linux.
    case deviceOwnerAuthenticationWithWatch = 3
    case deviceOwnerAuthenticationWithBiometricsOrWatch = 4
    case deviceOwnerAuthenticationWithWristDetection = 5
}

/// The kind of biometry the machine offers: a fingerprint reader stands where Touch ID does.
public enum LABiometryType: Int, Sendable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

/// What setCredential(_:type:) sets.
public enum LACredentialType: Int, Sendable {
    case applicationPassword = 0
    case smartCardPIN = -3
}

/// Operations evaluateAccessControl(_:operation:localizedReason:reply:) is asked about.
public enum LAAccessControlOperation: Int, Sendable {
    case createItem = 0
    case useItem = 1
    case createKey = 2
    case useKeySign = 3
    case useKeyDecrypt = 4
    case useKeyKeyExchange = 5
}

/// Apple's LATouchIDAuthenticationMaximumAllowableReuseDuration (300 s).
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: Double = 300
