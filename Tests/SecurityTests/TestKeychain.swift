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
        keychain = try SecKeychain.create(at: directory + "/keychains/test.keychain-db", password: Self.password,
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
