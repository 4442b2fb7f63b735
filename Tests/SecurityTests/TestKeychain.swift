import KeychainCore
import Security
import XCTest

/// A throwaway keychain in a private folder, unlocked in-process (embedded mode), made the
/// process's default so that SecItem calls without kSecUseKeychain land in it.
final class TestKeychain {
    let directory: String
    let keychain: SecKeychain
    static let password = "correct horse battery staple"

    init(storage: KeyStorage = .process) throws {
        var template = Array("/tmp/keychain-test-XXXXXX".utf8CString)
        guard let dir = mkdtemp(&template) else { throw SecError(errSecIO) }
        directory = String(cString: dir)
        keychain = try SecKeychain.create(
            at: directory + "/keychains/test.keychain-db", password: Self.password,
            storage: storage, scrypt: .fastForTesting)
        SecKeychain.setDefault(keychain)
    }

    var path: String { keychain.path }

    func tearDown() {
        keychain.store.lockAll()
        SecKeychain.setDefault(nil)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Runs `body` with standard output sent to a string, to check what the snippets print.
func captureStandardOutput(_ body: () throws -> Void) rethrows -> String {
    fflush(stdout)
    let path = NSTemporaryDirectory() + "capture-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
    let saved = dup(1)
    dup2(fd, 1)
    defer {
        fflush(stdout)
        dup2(saved, 1)
        close(saved)
        close(fd)
        unlink(path)
    }
    try body()
    fflush(stdout)
    return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
}

/// Two keychains, `first` and `second`, in a scratch XDG_DATA_HOME (so in the user's keychains
/// folder as the search list sees it), for `body`; the environment, the default and the files are
/// put back afterwards.
func withTwoScratchKeychains(_ name: String, _ body: (SecKeychain, SecKeychain) throws -> Void) throws {
    var template = Array("/tmp/keychain-\(name)-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw KeychainCore.KeychainError(.io, "mkdtemp") }
    let directory = String(cString: made)
    let savedData = getenv("XDG_DATA_HOME").map { String(cString: $0) }
    let savedPath = getenv("KEYCHAIN_PATH").map { String(cString: $0) }
    setenv("XDG_DATA_HOME", directory, 1)
    unsetenv("KEYCHAIN_PATH")
    SecKeychain.setDefault(nil)
    defer {
        if let savedData { setenv("XDG_DATA_HOME", savedData, 1) } else { unsetenv("XDG_DATA_HOME") }
        if let savedPath { setenv("KEYCHAIN_PATH", savedPath, 1) }
        try? FileManager.default.removeItem(atPath: directory)
    }
    let first = try SecKeychain.create(at: directory + "/keychains/first.keychain-db", password: "x", storage: .kernel, scrypt: .fastForTesting)
    defer { first.store.lockAll() }
    let second = try SecKeychain.create(at: directory + "/keychains/second.keychain-db", password: "x", storage: .kernel, scrypt: .fastForTesting)
    defer { second.store.lockAll() }
    try body(first, second)
}
