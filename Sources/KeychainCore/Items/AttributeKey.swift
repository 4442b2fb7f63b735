/// The four-letter attribute keys, named once: Apple's raw values of the kSecAttr* constants (what
/// `Item.attributes` and `Query.attributes` are keyed by, and what the Security module's kSecAttr*
/// constants hold), plus the engine's own hash attribute. Names follow Apple's constants without
/// their kSecAttr prefix.
package enum AttributeKey {
    // Every class
    /// kSecAttrAccessible: the protection class.
    package static let accessible = "pdmn"
    /// kSecAttrAccessControl: the conditions (SecAccessControlCreateFlags) on using the item.
    package static let accessControl = "accc"
    package static let accessGroup = "agrp"
    package static let label = "labl"
    package static let creationDate = "cdat"
    package static let modificationDate = "mdat"
    package static let synchronizable = "sync"
    /// The SHA-1 of the item's data as stored (Apple's `sha1` column).
    package static let sha1 = "sha1"

    // Passwords
    package static let account = "acct"
    package static let description = "desc"
    package static let comment = "icmt"
    package static let creator = "crtr"
    /// kSecAttrType for passwords; keys use the same raw value as `keyType`.
    package static let type = "type"
    package static let isInvisible = "invi"
    package static let isNegative = "nega"
    /// Generic passwords.
    package static let service = "svce"
    package static let generic = "gena"
    /// Internet passwords.
    package static let securityDomain = "sdmn"
    package static let server = "srvr"
    package static let path = "path"
    package static let `protocol` = "ptcl"
    package static let authenticationType = "atyp"
    package static let port = "port"

    // Certificates
    package static let certificateType = "ctyp"
    package static let certificateEncoding = "cenc"
    package static let subject = "subj"
    package static let issuer = "issr"
    package static let serialNumber = "slnr"
    package static let subjectKeyID = "skid"
    package static let publicKeyHash = "pkhh"

    // Keys
    package static let keyClass = "kcls"
    package static let keyType = "type"
    package static let keySizeInBits = "bsiz"
    package static let effectiveKeySize = "esiz"
    package static let applicationLabel = "klbl"
    package static let applicationTag = "atag"
    package static let isPermanent = "perm"
    package static let canEncrypt = "encr"
    package static let canDecrypt = "decr"
    package static let canDerive = "drve"
    package static let canSign = "sign"
    package static let canVerify = "vrfy"
    package static let canWrap = "wrap"
    package static let canUnwrap = "unwp"
}
