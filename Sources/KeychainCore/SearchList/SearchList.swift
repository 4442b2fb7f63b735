import Glibc

/// The user's keychain search list, as macOS keeps one per user: the keychains a search looks in,
/// in order, when it names none (`security find-*` without a keychain, SecItemCopyMatching without
/// kSecUseKeychain). It lives in a small file beside the keychains, one absolute path a line;
/// without that file the list is the default keychain alone, which is what searches used before
/// there was a list. `$KEYCHAIN_PATH`, when set, is searched first whatever the file says.
package enum SearchList {
    package static func file() -> String { KeychainFile.directory() + "/search-list" }

    /// The list as `security list-keychains` shows it: stale entries included, as on macOS.
    package static func current() -> [String] {
        var list = stored() ?? [KeychainFile.defaultPath()].filter(KeychainFile.exists)
        if let forced = KeychainFile.environment("KEYCHAIN_PATH"), !forced.isEmpty, !list.contains(forced) {
            list.insert(forced, at: 0)
        }
        return list
    }

    /// The keychains a search looks in: the list's keychains that exist, or else the default
    /// keychain, so that a user with no keychain at all hears that it is missing.
    package static func searched() -> [String] {
        let existing = current().filter(KeychainFile.exists)
        return existing.isEmpty ? [KeychainFile.defaultPath()] : existing
    }

    /// The one rule for searching several keychains in order (SecItemCopyMatching without
    /// kSecUseKeychain, `security find-*`, keychain_find.c's find_first_*): `body` searches one
    /// keychain for at most `remaining` results (nil: all) and returns what it found. A keychain
    /// where nothing is found is passed over; so is one that cannot be searched, whose error is
    /// reported only when nothing is found anywhere. The person's answer to a presence check
    /// (cancelled, a wrong password, not to be asked) ends the search: the next keychain must
    /// neither ask again nor answer in its place. Stops once `limit` results are found; nothing
    /// found anywhere is that first error, or errSecItemNotFound.
    package static func search<Keychain, Found>(
        _ keychains: [Keychain], limit: Int? = nil,
        _ body: (Keychain, _ remaining: Int?) throws -> [Found]
    ) throws -> [Found] {
        var found: [Found] = []
        var failure: Error?
        for keychain in keychains {
            let remaining = limit.map { $0 - found.count }
            if let remaining, remaining <= 0 { break }
            do {
                found += try body(keychain, remaining)
            } catch let error as KeychainError where error.code == .itemNotFound {
                continue
            } catch let error as KeychainError where error.concernsPresence {
                throw error
            } catch {
                if failure == nil { failure = error }
            }
        }
        if found.isEmpty { throw failure ?? KeychainError(.itemNotFound) }
        return found
    }

    /// `list-keychains -s`: replaces the list (an empty one too).
    package static func set(_ paths: [String]) throws {
        var unique: [String] = []
        for path in paths.map(absolute) where !unique.contains(path) { unique.append(path) }
        try write(unique)
    }

    /// A keychain just created joins the list, as SecKeychainCreate does on macOS.
    package static func add(_ path: String) throws {
        let path = absolute(path)
        var list = stored() ?? [KeychainFile.defaultPath()].filter(KeychainFile.exists)
        guard !list.contains(path) else { return }
        list.append(path)
        try write(list)
    }

    /// A deleted keychain leaves the list.
    package static func remove(_ path: String) throws {
        let path = absolute(path)
        guard let list = stored(), list.contains(path) else { return }
        try write(list.filter { $0 != path })
    }

    static func stored() -> [String]? {
        let fd = open(file(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return bytes.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }.filter { $0.hasPrefix("/") }
    }

    private static func write(_ list: [String]) throws {
        let target = file()
        try KeychainFile.prepareDirectory(for: target)
        try PlainFiles.replace(target, with: Array(list.map { $0 + "\n" }.joined().utf8), temporarySuffix: ".tmp")
    }

    /// Paths are kept absolute: the list is read from any working directory.
    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        var directory = String(cString: buffer)
        if directory != "/" { directory += "/" }
        var relative = Substring(path)
        while relative.hasPrefix("./") { relative = relative.dropFirst(2) }
        return directory + relative
    }
}
