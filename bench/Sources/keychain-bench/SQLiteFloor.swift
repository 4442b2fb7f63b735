import CSQLite
import Glibc

/// The floor for a lookup: one row fetched by an indexed 32-byte key from a table of the same
/// size, through a statement prepared once, with no crypto and no dictionaries.
struct SQLiteFloor {
    private var db: OpaquePointer?
    private var select: OpaquePointer?
    let count: Int

    init(path: String, count: Int) {
        self.count = count
        sqlite3_open(path, &db)
        sqlite3_exec(
            db,
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                + "CREATE TABLE t(id INTEGER PRIMARY KEY, pk BLOB NOT NULL UNIQUE, account BLOB, value BLOB)", nil, nil, nil)
        sqlite3_exec(db, "BEGIN", nil, nil, nil)
        var insert: OpaquePointer?
        sqlite3_prepare_v2(db, "INSERT INTO t(pk, account, value) VALUES (?, ?, ?)", -1, &insert, nil)
        let value = [UInt8](repeating: 0xA5, count: 200)
        for i in 0..<count {
            let key = Self.key(i)
            sqlite3_bind_blob(insert, 1, key, Int32(key.count), nil)
            sqlite3_bind_blob(insert, 2, key, Int32(key.count), nil)
            sqlite3_bind_blob(insert, 3, value, Int32(value.count), nil)
            sqlite3_step(insert)
            sqlite3_reset(insert)
        }
        sqlite3_finalize(insert)
        sqlite3_exec(db, "COMMIT", nil, nil, nil)
        sqlite3_prepare_v2(db, "SELECT id, account, value FROM t WHERE pk = ?", -1, &select, nil)
    }

    /// 32 bytes per key, as the keychain's HMAC index columns.
    static func key(_ i: Int) -> [UInt8] {
        var key = [UInt8](repeating: 0, count: 32)
        withUnsafeBytes(of: UInt64(i).littleEndian) { for (n, byte) in $0.enumerated() { key[n] = byte } }
        return key
    }

    /// Returns the value's length, so the work cannot be optimised away.
    func lookup(_ i: Int) -> Int {
        let key = Self.key(i)
        sqlite3_bind_blob(select, 1, key, Int32(key.count), nil)
        defer { sqlite3_reset(select) }
        guard sqlite3_step(select) == SQLITE_ROW else { return -1 }
        return Int(sqlite3_column_bytes(select, 2))
    }

    func close() {
        sqlite3_finalize(select)
        sqlite3_close(db)
    }
}
