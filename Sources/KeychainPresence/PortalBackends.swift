import KeychainCore

/// Which xdg-desktop-portal backend serves an interface on a desktop, read as the portal front end
/// reads it. xdg-desktop-portal 1.18 and later (Debian 13) read `DESKTOP-portals.conf`'s
/// [preferred] section (the interface's own key, else `default`: backends by their .portal file's
/// name, `*` for any); before (Debian 12's 1.16), the .portal files whose UseIn names the desktop.
/// Either way a backend serves only what its .portal file's Interfaces lists.
package struct PortalBackends {
    struct Portal {
        var file: String
        var busName: String
        var interfaces: [String]
        var useIn: [String]
    }

    /// /usr/share/xdg-desktop-portal.
    package var directory: String

    package init(directory: String) { self.directory = directory }

    /// The bus names of the backends serving `interface` for `desktops` (XDG_CURRENT_DESKTOP's
    /// entries), in the order the front end would try them.
    package func serving(_ interface: String, for desktops: [String]) -> [String] {
        let portals = self.portals().filter { $0.interfaces.contains(interface) }
        var found: [String] = []
        for desktop in desktops.map({ $0.lowercased() }) where !desktop.isEmpty {
            if let preferred = preferred(interface, for: desktop) {
                for name in preferred {
                    found += portals.filter { name == "*" || $0.file == name }.map(\.busName)
                }
            } else {
                found += portals.filter { $0.useIn.contains(desktop) }.map(\.busName)
            }
        }
        var seen = Set<String>()
        return found.filter { seen.insert($0).inserted }
    }

    /// DESKTOP-portals.conf's backends for `interface`; nil without that file ("none" is a list
    /// of none).
    func preferred(_ interface: String, for desktop: String) -> [String]? {
        guard desktop.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }),
            let text = Self.read(directory + "/" + desktop + "-portals.conf")
        else { return nil }
        let section = Self.section("preferred", of: text)
        guard let value = section[interface] ?? section["default"] else { return [] }
        return value.split(separator: ";").map(Self.trimmed).filter { !$0.isEmpty && $0 != "none" }
    }

    func portals() -> [Portal] {
        let folder = directory + "/portals"
        return PlainFiles.list(folder).compactMap { file -> Portal? in
            guard file.hasSuffix(".portal"), let text = Self.read(folder + "/" + file) else { return nil }
            let keys = Self.section("portal", of: text)
            guard let busName = keys["DBusName"], !busName.isEmpty else { return nil }
            func list(_ key: String) -> [String] {
                (keys[key] ?? "").split(separator: ";").map(Self.trimmed).filter { !$0.isEmpty }
            }
            return Portal(
                file: String(file.dropLast(".portal".count)), busName: busName, interfaces: list("Interfaces"),
                useIn: list("UseIn").map { $0.lowercased() })
        }
    }

    /// A key file's section, keys to values.
    static func section(_ name: String, of text: String) -> [String: String] {
        var inside = false
        var keys: [String: String] = [:]
        for line in text.split(separator: "\n").map(trimmed) {
            if line.hasPrefix("[") {
                inside = line == "[" + name + "]"
                continue
            }
            guard inside, !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            keys[trimmed(line[..<equals])] = trimmed(line[line.index(after: equals)...])
        }
        return keys
    }

    /// A small file's text (the first 4 KiB: a .portal file is a few lines); nil when missing.
    static func read(_ path: String) -> String? { KeychainFile.readSmallFile(path) }

    static func trimmed<S: StringProtocol>(_ text: S) -> String {
        String(text.drop(while: { $0 == " " || $0 == "\t" || $0 == "\r" }).reversed().drop(while: { $0 == " " || $0 == "\t" || $0 == "\r" }).reversed())
    }
}
