/// The four-letter attribute keys, named once: Apple's raw values of the kSecAttr* constants (what
/// `Item.attributes` and `Query.attributes` are keyed by, and what the Security module's kSecAttr*
/// constants hold), plus the engine's own hash attribute. Names follow Apple's constants without
/// their kSecAttr prefix.
public enum AttributeKey {
    // Every class
    /// kSecAttrAccessible: the protection class.
    public static let accessible = "pdmn"
    /// kSecAttrAccessControl: the conditions (SecAccessControlCreateFlags) on using the item.
    public static let accessControl = "accc"
    public static let accessGroup = "agrp"
    public static let label = "labl"
    public static let creationDate = "cdat"
    public static let modificationDate = "mdat"
    public static let synchronizable = "sync"
    /// The SHA-1 of the item's data as stored (Apple's `sha1` column).
    public static let sha1 = "sha1"

    // Passwords
    public static let account = "acct"
    public static let description = "desc"
    public static let comment = "icmt"
    public static let creator = "crtr"
    /// kSecAttrType for passwords; keys use the same raw value as `keyType`.
    public static let type = "type"
    public static let isInvisible = "invi"
    public static let isNegative = "nega"
    /// Generic passwords.
    public static let service = "svce"
    public static let generic = "gena"
    /// Internet passwords.
    public static let securityDomain = "sdmn"
    public static let server = "srvr"
    public static let path = "path"
    public static let `protocol` = "ptcl"
    public static let authenticationType = "atyp"
    public static let port = "port"

    // Certificates
    public static let certificateType = "ctyp"
    public static let certificateEncoding = "cenc"
    public static let subject = "subj"
    public static let issuer = "issr"
    public static let serialNumber = "slnr"
    public static let subjectKeyID = "skid"
    public static let publicKeyHash = "pkhh"

    // Keys
    public static let keyClass = "kcls"
    public static let keyType = "type"
    public static let keySizeInBits = "bsiz"
    public static let effectiveKeySize = "esiz"
    public static let applicationLabel = "klbl"
    public static let applicationTag = "atag"
    public static let isPermanent = "perm"
    public static let canEncrypt = "encr"
    public static let canDecrypt = "decr"
    public static let canDerive = "drve"
    public static let canSign = "sign"
    public static let canVerify = "vrfy"
    public static let canWrap = "wrap"
    public static let canUnwrap = "unwp"
}
