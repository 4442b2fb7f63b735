import CSQLite
import Glibc
import KeychainCore

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

/// The floor for SecItemAdd, one call each: rows of the keychain's own shape (its schema, indexes
/// and settings; random keyed-hash columns, a 330-byte metadata and a 140-byte secret blob, the
/// sizes of the bench's items) inserted one transaction each, with the two uniqueness probes and
/// the row-id read an add makes. No crypto, no dictionaries: what the commits themselves cost.
enum SQLiteInsertFloor {
    /// Seconds for `count` inserts.
    static func seconds(path: String, count: Int) -> Double {
        var db: OpaquePointer?
        sqlite3_open(path, &db)
        defer { sqlite3_close(db) }
        sqlite3_exec(
            db,
            """
            PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA secure_delete=ON; PRAGMA temp_store=MEMORY;
            PRAGMA cache_size=-16384; PRAGMA wal_autocheckpoint=\(KeychainStore.walCheckpointPages);
            PRAGMA journal_size_limit=\(KeychainStore.walSizeLimit);
            CREATE TABLE items (rowid INTEGER PRIMARY KEY AUTOINCREMENT, class INTEGER NOT NULL, lockclass INTEGER NOT NULL,
                space INTEGER NOT NULL, pk BLOB NOT NULL, account BLOB NOT NULL, service BLOB NOT NULL,
                metadata BLOB NOT NULL, secret BLOB NOT NULL);
            CREATE UNIQUE INDEX items_pk ON items(space, class, pk);
            CREATE INDEX items_service ON items(space, class, service, account);
            CREATE INDEX items_account ON items(space, class, account);
            """, nil, nil, nil)
        func prepare(_ sql: String) -> OpaquePointer? {
            var stmt: OpaquePointer?
            sqlite3_prepare_v2(db, sql, -1, &stmt, nil)
            return stmt
        }
        let begin = prepare("BEGIN IMMEDIATE"), commit = prepare("COMMIT")
        let probe = prepare("SELECT rowid FROM items WHERE space = ? AND class = 2 AND pk = ?")
        let sequence = prepare("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'items'), 0) + 1")
        let insert = prepare("INSERT INTO items(rowid, class, lockclass, space, pk, account, service, metadata, secret) VALUES (?, 2, 1, 1, ?, ?, ?, ?, ?)")
        defer { for stmt in [begin, commit, probe, sequence, insert] { sqlite3_finalize(stmt) } }
        let metadata = [UInt8](repeating: 0x5A, count: 330), secret = [UInt8](repeating: 0xA5, count: 140)
        var random = SeededGenerator(state: 7)
        let start = SystemClock.monotonic()
        for _ in 0..<count {
            let pk = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
            sqlite3_step(begin)
            sqlite3_reset(begin)
            for space in 1...2 {
                sqlite3_bind_int(probe, 1, Int32(space))
                pk.withUnsafeBufferPointer { p in
                    sqlite3_bind_blob(probe, 2, p.baseAddress, 32, nil)
                    sqlite3_step(probe)
                }
                sqlite3_reset(probe)
            }
            sqlite3_step(sequence)
            let rowID = sqlite3_column_int64(sequence, 0)
            sqlite3_reset(sequence)
            sqlite3_bind_int64(insert, 1, rowID)
            pk.withUnsafeBufferPointer { p in
                sqlite3_bind_blob(insert, 2, p.baseAddress, 32, nil)
                sqlite3_bind_blob(insert, 3, p.baseAddress, 16, nil)
                sqlite3_bind_blob(insert, 4, p.baseAddress! + 16, 16, nil)
                metadata.withUnsafeBufferPointer { m in
                    secret.withUnsafeBufferPointer { s in
                        sqlite3_bind_blob(insert, 5, m.baseAddress, Int32(m.count), nil)
                        sqlite3_bind_blob(insert, 6, s.baseAddress, Int32(s.count), nil)
                        if sqlite3_step(insert) != SQLITE_DONE { fail("insert floor: \(String(cString: sqlite3_errmsg(db)))") }
                    }
                }
            }
            sqlite3_reset(insert)
            sqlite3_step(commit)
            sqlite3_reset(commit)
        }
        return SystemClock.monotonic() - start
    }
}
