/// URL schemes and Apple's kSecAttrProtocol four-character codes, both ways, so that git, docker
/// and `security find-internet-password -r htps` name the same items.
package enum ProtocolCodes {
    static let byScheme: [String: String] = [
        "https": "htps", "http": "http", "ftp": "ftp ", "ftps": "ftps", "imap": "imap", "imaps": "imps",
        "smtp": "smtp", "ssh": "ssh ", "pop3": "pop3", "pop3s": "pops", "ldap": "ldap", "ldaps": "ldps",
        "telnet": "teln", "telnets": "tels", "irc": "irc ", "ircs": "ircs", "nntp": "nntp", "nntps": "ntps",
        "socks": "sox ", "afp": "afp ", "smb": "smb ", "rtsp": "rtsp", "ipp": "ipp ", "daap": "daap", "eppc": "eppc"
    ]
    static let byCode: [String: String] = Dictionary(uniqueKeysWithValues: byScheme.map { ($1, $0) })

    /// Apple's code for a scheme; a scheme without one is stored as it is, not dropped.
    package static func code(forScheme scheme: String) -> String {
        byScheme[scheme.lowercased()] ?? scheme.lowercased()
    }

    package static func scheme(forCode code: String) -> String {
        byCode[code] ?? code
    }
}
