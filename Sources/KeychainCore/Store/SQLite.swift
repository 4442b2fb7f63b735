internal import CLinux
internal import CSQLite
import Glibc

/// A small wrapper over one SQLite connection, with statements prepared once and reused.
package final class SQLiteDatabase {
    private var handle: OpaquePointer?
    private var cache: [String: SQLiteStatement] = [:]
    /// `execute`'s scripts, each statement prepared once (a Secret Service store runs its schema
    /// script every time).
    private var scripts: [String: [SQLiteStatement]] = [:]
    /// The transaction open on this connection: none, a read snapshot (`read`), or a write
    /// transaction (`transaction`, with savepoints inside it for nested ones).
    private enum Open { case none, read, write }
    private var open = Open.none

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
        sqlite3_busy_timeout(db, Self.busyMilliseconds)
    }

    private static let busyMilliseconds: Int32 = 10_000

    /// Copies the write-ahead log into the file and empties it, waiting at most `milliseconds` for
    /// other connections' older snapshots; false when one kept it from finishing (or a transaction
    /// of this connection is open).
    ///
    /// Until it succeeds, `logStillToEmpty` holds and this connection tries again without waiting
    /// after each of its later transactions and snapshots, and for a second when it closes: the
    /// automatic checkpoints never empty the log, and it is no longer cut back after them.
    @discardableResult
    package func checkpointEmptyingLog(waitingAtMost milliseconds: Int32) -> Bool {
        sqlite3_busy_timeout(handle, milliseconds)
        defer { sqlite3_busy_timeout(handle, Self.busyMilliseconds) }
        var frames: Int32 = -1
        let emptied = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_TRUNCATE, &frames, nil) == SQLITE_OK && frames == 0
        logStillToEmpty = !emptied
        return emptied
    }

    /// A checkpoint that must empty the log (`checkpointEmptyingLog`) has not managed to yet.
    package private(set) var logStillToEmpty = false

    private func emptyLogIfStillToDo() {
        if logStillToEmpty && open == .none { checkpointEmptyingLog(waitingAtMost: 0) }
    }

    deinit {
        cache.removeAll()
        scripts.removeAll()
        if logStillToEmpty { checkpointEmptyingLog(waitingAtMost: 1000) }
        sqlite3_close_v2(handle)
    }

    /// Runs every statement of `sql` in turn. Each is prepared the first time, just before it runs
    /// (a script may create what its next statement uses), and kept for the next time.
    package func execute(_ sql: String) throws {
        if let script = scripts[sql] {
            for stmt in script { try stmt.run() }
            return
        }
        var script: [SQLiteStatement] = []
        try sql.withCString { text in
            var next: UnsafePointer<CChar>? = text
            while let start = next, start.pointee != 0 {
                var stmt: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let rc = sqlite3_prepare_v3(handle, start, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, &tail)
                guard rc == SQLITE_OK else { throw SQLiteDatabase.failure(rc, errorMessage) }
                next = tail
                guard let stmt else { continue }  // whitespace or a comment
                let wrapped = SQLiteStatement(stmt, database: self)
                try wrapped.run()
                script.append(wrapped)
            }
        }
        scripts[sql] = script
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
    package var changes: Int { Int(sqlite3_changes(handle)) }
    /// Rows this connection has inserted, changed or deleted since it opened (rolled back or not):
    /// moves with every write of this process, which data_version does not see.
    var totalChanges: Int64 { Int64(sqlite3_total_changes64(handle)) }
    var errorMessage: String { String(cString: sqlite3_errmsg(handle)) }

    /// Runs `body` in one IMMEDIATE transaction: the write lock is taken up front, so a reader
    /// never has to upgrade and two writers never deadlock.
    ///
    /// Inside a transaction already open (a batch: `KeychainStore.batch`), `body` runs in a
    /// savepoint of it instead: what `body` wrote is undone if it throws, the rest of the outer
    /// transaction stays, and nothing is committed until the outer transaction is.
    package func transaction<T>(_ body: () throws -> T) throws -> T {
        switch open {
        case .read:
            // A snapshot read for a lookup would have to be upgraded, which a concurrent writer
            // can make fail; no write is ever started inside one.
            preconditionFailure("a write transaction inside a read snapshot")
        case .write:
            // After SQLite rolled the transaction back by itself, the savepoint is refused with
            // every other statement (`SQLiteStatement.step`): it would start a transaction of its own.
            try statement("SAVEPOINT nested").run()
            do {
                let result = try body()
                try statement("RELEASE nested").run()
                return result
            } catch {
                try? statement("ROLLBACK TO nested").run()
                try? statement("RELEASE nested").run()
                throw error
            }
        case .none:
            try statement("BEGIN IMMEDIATE").run()
            open = .write
            do {
                let result = try body()
                try statement("COMMIT").run()
                open = .none
                emptyLogIfStillToDo()
                return result
            } catch {
                try? statement("ROLLBACK").run()
                open = .none
                throw error
            }
        }
    }

    /// Runs `body`'s reads in one snapshot: one WAL read lock taken and released (two system
    /// calls) instead of one per statement, and every statement sees the same committed state.
    /// Inside a transaction already open, `body` just runs in it.
    func read<T>(_ body: () throws -> T) throws -> T {
        guard open == .none else { return try body() }
        try statement("BEGIN").run()
        open = .read
        defer { open = .none }
        do {
            let result = try body()
            try statement("COMMIT").run()
            open = .none
            emptyLogIfStillToDo()
            return result
        } catch {
            try? statement("ROLLBACK").run()
            throw error
        }
    }

    /// Whether a read snapshot or a transaction is open on this connection.
    var inTransaction: Bool { open != .none }

    /// Whether SQLite rolled back the write transaction open here by itself, as it does after a
    /// full disk, an I/O error, no memory, or a trigger's RAISE(ROLLBACK). Any statement then
    /// would run in a transaction of its own and commit at once, outside the batch or the
    /// operation that is about to fail (an add that retries in another access group, a caller
    /// that catches each item's error): none is run (`SQLiteStatement.step`).
    package var lostItsTransaction: Bool { open == .write && sqlite3_get_autocommit(handle) != 0 }

    static func transactionLost() -> KeychainError {
        KeychainError(.io, "the transaction was rolled back after an error; nothing of it was stored")
    }

    /// Whether a read snapshot (`read`) is open: nothing may be written, and what it reads may be
    /// older than the file.
    var inReadSnapshot: Bool { open == .read }

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
        guard !database.lostItsTransaction else { throw SQLiteDatabase.transactionLost() }
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
