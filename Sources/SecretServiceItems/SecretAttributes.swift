import KeychainCore

/// How the Secret Service's free-form string attributes and Apple's typed attributes describe the
/// same item, both ways.
///
/// An item whose attributes include any of the network-password names (libsecret's
/// `org.gnome.keyring.NetworkPassword` schema, and exactly what git's libsecret helper stores under
/// `org.git.Password`) is an internet password: user -> acct, server -> srvr, protocol -> ptcl (URL
/// scheme to Apple's four-character code), port -> port, object -> path, authtype -> atyp,
/// domain -> sdmn. Any other item is a generic password: service -> svce, account (or, without
/// it, username) -> acct. Every attribute, mapped or not, is also kept as given (encrypted with the
/// rest of the metadata), so a client reads back exactly what it stored; when another front end
/// changes a mapped Apple attribute later, the Secret Service sees the new value.
package enum SecretAttributes {
    /// libsecret's schema for network passwords. Clients that search with a schema add its name as
    /// `xdg:schema`, so internet passwords stored by other front ends show this one.
    package static let networkSchemaKey = "xdg:schema"
    package static let networkSchema = "org.gnome.keyring.NetworkPassword"

    static let networkNames: [(name: String, apple: String)] = [
        ("user", "acct"), ("server", "srvr"), ("protocol", "ptcl"), ("port", "port"),
        ("object", "path"), ("authtype", "atyp"), ("domain", "sdmn")
    ]

    /// Whether a query's pair can be matched, for an item of `itemClass`, without the attribute
    /// index: an attribute the class maps to one of Apple's (an internet password's `service` is
    /// not one, nor a generic password's `server`), or the network schema that internet passwords
    /// show.
    static func isMapped(_ name: String, _ value: String, for itemClass: ItemClass) -> Bool {
        guard itemClass == .internetPassword else { return name == "service" || name == "account" || name == "username" }
        return name == networkSchemaKey ? value == networkSchema : networkNames.contains { $0.name == name }
    }

    /// The class an item with these attributes is stored as.
    package static func itemClass(for attributes: [String: String]) -> ItemClass {
        networkNames.contains { attributes[$0.name] != nil } ? .internetPassword : .genericPassword
    }

    /// The Secret Service name of each mapped Apple attribute of `itemClass`, given what the
    /// client called them (a generic password's acct is `account`, or `username` when only that
    /// was given).
    static func mappedNames(_ itemClass: ItemClass, stored: [String: String]) -> [(name: String, apple: String)] {
        switch itemClass {
        case .internetPassword:
            return networkNames
        default:
            let account = stored["account"] == nil && stored["username"] != nil ? "username" : "account"
            return [("service", "svce"), (account, "acct")]
        }
    }

    /// Apple's attributes for a Secret Service attribute set, as they are stored and indexed.
    static func appleAttributes(_ attributes: [String: String], itemClass: ItemClass) -> [String: AttributeValue] {
        var out: [String: AttributeValue] = [:]
        for (name, apple) in mappedNames(itemClass, stored: attributes) {
            guard let text = attributes[name], let value = appleValue(apple, text) else { continue }
            out[apple] = value
        }
        return out
    }

    private static func appleValue(_ apple: String, _ text: String) -> AttributeValue? {
        switch apple {
        case "ptcl": return .string(ProtocolCodes.code(forScheme: text))
        case "port":
            // A port that is not one stays an unmapped attribute rather than failing the store.
            guard !text.isEmpty, text.utf8.count <= 5, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                let port = Int64(text), port <= 65535
            else { return nil }
            return .int(port)
        default: return .string(text)
        }
    }

    /// The Apple attribute as Secret Service text; "" when absent (absent attributes are not shown).
    /// Only a stored value is read: every class default shows as "" (the tests hold each mapped
    /// attribute's default to that), and looking a default up costs each view a schema search.
    private static func text(of item: Item, apple: String) -> String {
        item.attributes[apple].map { text($0, apple: apple) } ?? ""
    }

    static func text(_ value: AttributeValue, apple: String) -> String {
        switch apple {
        case "ptcl":
            if let code = value.stringValue { return code.isEmpty ? "" : ProtocolCodes.scheme(forCode: code) }
            if let number = value.intValue, number != 0 {
                let bytes = (0..<4).map { UInt8(truncatingIfNeeded: number >> (24 - 8 * Int64($0))) }
                return ProtocolCodes.scheme(forCode: String(decoding: bytes, as: UTF8.self))
            }
            return ""
        case "port":
            let port = value.intValue ?? 0
            return port == 0 ? "" : String(port)
        default:
            return value.stringValue ?? ""
        }
    }

    /// The attributes the Secret Service shows for an item, whichever front end stored it.
    package static func view(of item: Item) -> [String: String] {
        let stored = storedAttributes(of: item)
        guard item.itemClass == .genericPassword || item.itemClass == .internetPassword else { return stored }
        var out = stored
        if stored.isEmpty, item.itemClass == .internetPassword { out[networkSchemaKey] = networkSchema }
        for (name, apple) in mappedNames(item.itemClass, stored: stored) {
            out[name] = mappedValue(name, apple: apple, of: item, stored: stored)
        }
        return out
    }

    /// A mapped attribute as the view shows it: what the client stored stands while the Apple
    /// attribute still says the same (a port that is not a number was never mapped and stands
    /// while the item has no port); else the Apple attribute's text, nil when it has none.
    private static func mappedValue(_ name: String, apple: String, of item: Item, stored: [String: String]) -> String? {
        let current = text(of: item, apple: apple)
        if let given = stored[name], (appleValue(apple, given).map { text($0, apple: apple) } ?? "") == current { return given }
        return current.isEmpty ? nil : current
    }

    /// `view(of: item)[name]`, without building the rest of the view: what a search compares.
    /// `stored` is `storedAttributes(of: item)`.
    static func value(_ name: String, of item: Item, stored: [String: String]) -> String? {
        guard item.itemClass == .genericPassword || item.itemClass == .internetPassword else { return stored[name] }
        if let apple = mappedNames(item.itemClass, stored: stored).first(where: { $0.name == name })?.apple {
            return mappedValue(name, apple: apple, of: item, stored: stored)
        }
        if name == networkSchemaKey, stored.isEmpty, item.itemClass == .internetPassword { return networkSchema }
        return stored[name]
    }

    /// Whether the item's view holds every pair of `query`.
    static func viewMatches(_ query: [String: String], _ item: Item) -> Bool {
        if query.isEmpty { return true }
        let stored = storedAttributes(of: item)
        return query.allSatisfy { value($0.key, of: item, stored: stored) == $0.value }
    }

    static func storedAttributes(of item: Item) -> [String: String] { FreeFormAttributes.of(item) }
}
