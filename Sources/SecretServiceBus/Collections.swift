import Glibc
import KeychainCore
import SecretServiceItems
import SessionBus

/// The object paths of the spec.
package enum ObjectPaths {
    package static let root = "/org/freedesktop/secrets"
    static let collections = root + "/collection/"
    static let aliases = root + "/aliases/"
    static let sessions = root + "/session/"
    package static let prompts = root + "/prompt/"
    /// "No object": what the spec returns for no prompt, no alias.
    package static let none = "/"

    /// A keychain name as one path element: letters and digits as they are, every other byte `_xx`.
    package static func element(for name: String) -> String {
        var out = ""
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = Array("0123456789abcdef")
                out += "_" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 15)])
            }
        }
        return out
    }
}

/// One collection: a keychain file, opened on first use with its keys from the kernel, so its
/// lock state is the one `security` and the helpers see.
package final class Collection {
    package let name: String
    package let file: String
    let element: String
    /// Makes the store instead of opening a file: the session collection's, whose keys never
    /// leave this process and which is therefore never locked.
    private let make: (() throws -> KeychainStore)?
    private var opened: KeychainStore?
    /// The file the store was opened on: a keychain deleted and made again under the same name is
    /// another keychain, which this collection's open handle would not see.
    private var openedIdentity: FileIdentity?
    /// The Locked value last announced, to emit PropertiesChanged when it changes.
    var announcedLocked: Bool?

    init(file: String, make: (() throws -> KeychainStore)? = nil) {
        self.file = file
        self.make = make
        var base = String(file.split(separator: "/").last ?? "")
        if base.hasSuffix(".keychain-db") { base.removeLast(".keychain-db".count) }
        name = base
        // A keychain file named `session` must not take the session collection's path; `_2`
        // cannot come out of the escaping (`_` is always followed by two hex digits).
        element = make == nil && base == SessionCollection.name ? SessionCollection.name + "_2" : ObjectPaths.element(for: base)
    }

    package var isSession: Bool { make != nil }

    package var path: String { ObjectPaths.collections + element }

    func itemPath(_ row: Int64) -> String { path + "/" + String(row) }

    package func store() throws -> KeychainStore {
        if let opened { return opened }
        if let make {
            opened = try make()
            return opened!
        }
        // The file looked at before and after the open: the same both times, it is the file opened.
        for _ in 0..<3 {
            let before = FileIdentity(file)
            let store = try KeychainStore.open(at: file, storage: .kernel)
            guard let before, before == FileIdentity(file) else { continue }
            (opened, openedIdentity) = (store, before)
            return store
        }
        throw ServiceError.failed("the keychain \(name) kept changing while it was opened")
    }

    /// Whether the file now at this collection's path is not the one its store has open.
    var isReplaced: Bool {
        guard let openedIdentity else { return false }
        return FileIdentity(file) != openedIdentity
    }

    /// Whether its keychain was opened (or, for the session collection, made) by this run. The
    /// session collection's keychain is made on its first use and can be opened by nothing else:
    /// until then it holds no item, and a search need not make it to find nothing.
    var isOpen: Bool { opened != nil }

    /// Locked is the WhenUnlocked class's state in the kernel, read afresh on every call.
    package var isLocked: Bool { !isSession && (try? store().status.whenUnlocked) != true }

    func forget() {
        opened = nil
        openedIdentity = nil
    }
}

/// A file's device and inode, nil for one that is not there.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    init?(_ path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        self.init(st)
    }

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}

/// The collections: every keychain in the keychains folder and the default keychain wherever it
/// is; the `default` alias is the default keychain (`security default-keychain`).
package final class CollectionRegistry {
    private var byFile: [String: Collection] = [:]
    private var byElement: [String: Collection] = [:]
    /// Aliases other than `default`, for this run of the service.
    private var aliases: [String: String] = [:]
    /// Always there, under its own name and alias; its keychain is made on first use.
    let session = Collection(file: SessionCollection.file, make: SessionCollection.makeStore)

    init() {
        byElement[session.element] = session
    }

    /// What tells that the last rescan still holds: the kernel's watch where it can be armed,
    /// else the folder as the last rescan saw it. And the default keychain that rescan found.
    private let watch = FolderWatch()
    private var scanned: FolderStamp?
    private var chosenDefault = ""
    private var sorted: [Collection]?

    /// Rescans the folder: keychains made or removed by `security` show up and go.
    func refresh() {
        if watch.isArmed {
            if !watch.changed() { return }
        } else if let scanned, scanned.isSettled, scanned == FolderStamp(chosen: chosenDefault) {
            return
        }
        var chosen = chosenDefault
        // Armed before the reads and the listing, so a change made during them is an event next
        // time; armed again while the default read after arming is not the one it watches for.
        for _ in 0..<3 {
            guard watch.arm(Self.watched(chosen: chosen)) else { break }
            let now = KeychainFile.defaultPath()
            if now == chosen { break }
            chosen = now
            watch.disarm()
        }
        var stamp: FolderStamp?
        if !watch.isArmed {
            // Taken before the listing: a change made during it shows as a new stamp next time.
            stamp = FolderStamp(chosen: chosenDefault)
            chosen = KeychainFile.defaultPath()
        }
        chosenDefault = chosen
        let files = KeychainFile.list(including: chosenDefault)
        scanned = stamp
        sorted = nil
        // A keychain deleted and made again under its name is a new collection at the same path.
        for file in files where byFile[file]?.isReplaced == true {
            if let old = byFile[file] { byElement[old.element] = nil }
            byFile[file] = nil
        }
        for file in files where byFile[file] == nil {
            let collection = Collection(file: file)
            guard byElement[collection.element] == nil else { continue }
            byFile[file] = collection
            byElement[collection.element] = collection
        }
        for (file, collection) in byFile where !files.contains(file) {
            byFile[file] = nil
            byElement[collection.element] = nil
        }
    }

    package var all: [Collection] {
        refresh()
        if let sorted { return sorted }
        let all = byElement.values.sorted { $0.name < $1.name }
        sorted = all
        return all
    }

    var defaultCollection: Collection? {
        refresh()
        let path = chosenDefault
        return byFile[path] ?? byFile.values.first { KeychainFile.sameFile($0.file, path) }
    }

    /// Whether the service must never delete this keychain: the login or the default one.
    package func isLoginOrDefault(_ collection: Collection) -> Bool {
        KeychainFile.sameFile(collection.file, KeychainFile.loginPath()) || collection === defaultCollection
    }

    func collection(element: String) -> Collection? {
        if let found = byElement[element] { return found }
        refresh()
        return byElement[element]
    }

    func alias(_ name: String) -> Collection? {
        if name == "default" { return defaultCollection }
        if name == SessionCollection.name { return session }
        return aliases[name].flatMap { collection(element: $0) }
    }

    func setAlias(_ name: String, to collection: Collection?) throws {
        if name == "default" {
            guard let collection else { throw ServiceError.notSupported("the default alias names the default keychain; it cannot be removed") }
            guard !collection.isSession else {
                throw ServiceError.notSupported("the session collection lasts as long as the service; it cannot be the default keychain")
            }
            // The default keychain is where security, git and docker store: a client may name one
            // only where there is none (a first keychain made through a prompt), never move it.
            if let current = defaultCollection {
                guard current === collection else {
                    throw ServiceError.accessDenied("the default keychain is \(current.name); choose another with `security default-keychain -s`")
                }
                return
            }
            try KeychainFile.setDefaultPath(collection.file)
            return
        }
        guard name != SessionCollection.name else { throw ServiceError.notSupported("the session alias names the session collection") }
        aliases[name] = collection?.element
    }

    func aliasNames(of collection: Collection) -> [String] {
        var names = aliases.filter { $0.value == collection.element }.map(\.key)
        if defaultCollection === collection { names.append("default") }
        if collection === session { names.append(SessionCollection.name) }
        return names.sorted()
    }

    /// The collection and item an object path names (through a collection or an alias).
    func resolve(_ path: String) -> (collection: Collection, row: Int64?)? {
        // On the path's bytes: GetSecret(s) resolve every item path, and splitting and testing it
        // by Character cost as much as reading the item's row. Object paths are ASCII.
        let utf8 = path.utf8
        let viaAlias: Bool
        let prefix: String
        if utf8.starts(with: ObjectPaths.collections.utf8) {
            (prefix, viaAlias) = (ObjectPaths.collections, false)
        } else if utf8.starts(with: ObjectPaths.aliases.utf8) {
            (prefix, viaAlias) = (ObjectPaths.aliases, true)
        } else {
            return nil
        }
        let start = utf8.index(utf8.startIndex, offsetBy: prefix.utf8.count)
        let slash = utf8[start...].firstIndex(of: UInt8(ascii: "/"))
        let name = String(path[start..<(slash ?? path.endIndex)])
        guard !name.isEmpty, let collection = viaAlias ? alias(name) : self.collection(element: name) else { return nil }
        guard let slash else { return (collection, nil) }
        let rowStart = utf8.index(after: slash)
        let digits = utf8[rowStart...]
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let row = Int64(String(path[rowStart...])), row > 0
        else { return nil }
        return (collection, row)
    }

    func add(file: String) -> Collection {
        refresh()
        if let existing = byFile[file] { return existing }
        let collection = Collection(file: file)
        byFile[file] = collection
        byElement[collection.element] = collection
        forgetScan()
        return collection
    }

    func remove(_ collection: Collection) {
        byFile[collection.file] = nil
        byElement[collection.element] = nil
        aliases = aliases.filter { $0.value != collection.element }
        forgetScan()
    }

    /// The next look at the collections lists the folder again.
    private func forgetScan() {
        watch.disarm()
        scanned = nil
        sorted = nil
    }

    /// The files whose folders a rescan depends on: the keychains folder (through the login
    /// keychain it holds), the default-keychain choice (its contents too), and the chosen file.
    private static func watched(chosen: String) -> [(path: String, contents: Bool)] {
        var files = [(KeychainFile.loginPath(), false), (KeychainFile.defaultChoiceFile(), true)]
        if !chosen.isEmpty { files.append((chosen, false)) }
        return files
    }
}
