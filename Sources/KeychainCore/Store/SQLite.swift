internal import CLinux
internal import CSQLite
import Glibc

/// A small wrapper over one SQLite connection, with statements prepared once and reused.
package final class SQLiteDatabase {
    private var handle: OpaquePointer?
    private var cache: [String: SQLiteStatement] = [:]

    /// Opens the keychain at `path` once its folder and files pass KeychainFile's checks, and
    /// checks that SQLite opened the very file that was checked.
    convenience init(verified path: String) throws {
        let location = try KeychainFile.verifiedLocation(of: path)
        try self.init(path: location.sqlitePath)
        var st = stat()
        guard stat(location.sqlitePath, &st) == 0, UInt64(st.st_dev) == location.device, UInt64(st.st_ino) == location.inode else {
            throw KeychainError(.param, "refusing \(path): it was replaced while it was being opened")
        }
    }

    init(path: String) throws {
        var db: OpaquePointer?
        // NOFOLLOW: no symbolic link anywhere in the path (the caller resolved the folder's).
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw KeychainError(.io, "cannot open \(path): \(message)")
        }
        // The file is the user's to edit: its schema must not be able to run anything.
        guard clinux_sqlite_harden(UnsafeMutableRawPointer(db)) == SQLITE_OK else {
            sqlite3_close(db)
            throw KeychainError(.io, "cannot open \(path): SQLite's defensive mode is not available")
        }
        handle = db
        // Writers from other processes (git, docker, security) wait for each other instead of failing.
        sqlite3_busy_timeout(db, 10_000)
    }

    deinit {
        cache.removeAll()
        sqlite3_close_v2(handle)
    }

    package func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? "error \(rc)"
            sqlite3_free(error)
            throw SQLiteDatabase.failure(rc, message)
        }
    }

    package func statement(_ sql: String) throws -> SQLiteStatement {
        if let cached = cache[sql] {
            cached.reset()
            return cached
        }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw SQLiteDatabase.failure(rc, errorMessage) }
        let wrapped = SQLiteStatement(stmt, database: self)
        cache[sql] = wrapped
        return wrapped
    }

    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }
    var changes: Int { Int(sqlite3_changes(handle)) }
    var errorMessage: String { String(cString: sqlite3_errmsg(handle)) }

    /// Runs `body` in one IMMEDIATE transaction: the write lock is taken up front, so a reader
    /// never has to upgrade and two writers never deadlock.
    package func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    static func failure(_ rc: Int32, _ message: String) -> KeychainError {
        switch rc & 0xff {
        case SQLITE_CORRUPT, SQLITE_NOTADB: return KeychainError(.decode, "keychain file is damaged: \(message)")
        case SQLITE_NOMEM: return KeychainError(.allocate, message)
        case SQLITE_BUSY, SQLITE_LOCKED: return KeychainError(.io, "keychain is busy: \(message)")
        case SQLITE_CONSTRAINT: return KeychainError(.duplicateItem, message)
        default: return KeychainError(.io, "keychain file: \(message)")
        }
    }
}

package final class SQLiteStatement {
    private let stmt: OpaquePointer
    private unowned let database: SQLiteDatabase

    init(_ stmt: OpaquePointer, database: SQLiteDatabase) {
        self.stmt = stmt
        self.database = database
    }

    deinit { sqlite3_finalize(stmt) }

    package func reset() {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
    }

    @discardableResult
    package func bind(_ values: [SQLiteValue]) -> SQLiteStatement {
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            switch value {
            case .null: sqlite3_bind_null(stmt, index)
            case .int(let v): sqlite3_bind_int64(stmt, index, v)
            case .text(let s): sqlite3_bind_text(stmt, index, s, -1, SQLITE_TRANSIENT)
            case .blob(let b):
                b.withUnsafeBytes { raw in
                    _ = sqlite3_bind_blob(stmt, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(b.count), SQLITE_TRANSIENT)
                }
            }
        }
        return self
    }

    /// Steps once; true while there is a row to read.
    package func step() throws -> Bool {
        let rc = sqlite3_step(stmt)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let message = database.errorMessage
            sqlite3_reset(stmt)
            throw SQLiteDatabase.failure(rc, message)
        }
    }

    package func run(_ values: [SQLiteValue] = []) throws {
        bind(values)
        defer { sqlite3_reset(stmt) }
        while try step() {}
    }

    package func int(_ column: Int32) -> Int64 { sqlite3_column_int64(stmt, column) }

    package func blob(_ column: Int32) -> Bytes {
        let n = Int(sqlite3_column_bytes(stmt, column))
        guard n > 0, let p = sqlite3_column_blob(stmt, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    func text(_ column: Int32) -> String {
        guard let p = sqlite3_column_text(stmt, column) else { return "" }
        return String(cString: p)
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(stmt, column) == SQLITE_NULL }
}

package enum SQLiteValue {
    case null
    case int(Int64)
    case text(String)
    case blob(Bytes)
}

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift does not import.
private let SQLITE_TRANSIENT = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
