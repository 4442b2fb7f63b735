/// How Flatpak and snapd name a sandboxed app, read from what they leave on its processes.
package enum SandboxIDs {
    /// `snap.NAME` for a process confined by a snap's AppArmor profile (`snap.NAME.APP (enforce)`).
    package static func appArmorAppID(_ label: String) -> String? {
        guard label.hasPrefix("snap.") else { return nil }
        let profile = label.split(separator: " ").first ?? ""
        let parts = profile.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 3, isAppID(String(parts[1])) else { return nil }
        return "snap." + parts[1]
    }

    /// The `name` of the `[Application]` group of a Flatpak keyfile.
    package static func flatpakAppID(_ bytes: [UInt8]) -> String? {
        guard let id = flatpakValue(bytes, group: "Application", key: "name") else { return nil }
        return isAppID(id) ? id : nil
    }

    /// The first `key=` of `group` in a Flatpak keyfile (`/.flatpak-info`), trimmed; nil when absent.
    package static func flatpakValue(_ bytes: [UInt8], group wanted: String, key: String) -> String? {
        var group = ""
        for raw in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let line = trimmed(raw)
            if line.hasPrefix("[") && line.hasSuffix("]") {
                group = String(line.dropFirst().dropLast())
            } else if group == wanted, line.hasPrefix(key + "=") {
                return trimmed(line.dropFirst(key.count + 1))
            }
        }
        return nil
    }

    /// `snap.NAME` for a process in one of snapd's scopes (`snap.NAME.APP-….scope`), or the app id
    /// of Flatpak's own scope (`app-flatpak-ID-N.scope`).
    package static func cgroupAppID(_ cgroups: String) -> String? {
        for line in cgroups.split(separator: "\n") {
            for element in line.split(separator: "/") {
                if element.hasPrefix("snap.") {
                    let parts = element.split(separator: ".", omittingEmptySubsequences: false)
                    if parts.count >= 3, isAppID(String(parts[1])) { return "snap." + parts[1] }
                } else if element.hasPrefix("app-flatpak-"), element.hasSuffix(".scope") {
                    let rest = element.dropFirst("app-flatpak-".count).dropLast(".scope".count)
                    if let dash = rest.lastIndex(of: "-"), isAppID(String(rest[..<dash])) { return String(rest[..<dash]) }
                }
            }
        }
        return nil
    }

    /// Letters, digits, `.`, `_` and `-`, as Flatpak and snapd allow in their ids.
    package static func isAppID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 255
            && id.utf8.allSatisfy { byte in
                (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
    }

    private static func trimmed(_ text: Substring) -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) }) else { return "" }
        return String(text[first...last])
    }
}
