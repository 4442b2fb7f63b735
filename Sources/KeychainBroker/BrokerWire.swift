import KeychainCore

/// The messages between a client (`BrokerCustodian`) and `keychain-broker`: one request, one
/// reply, each one SOCK_SEQPACKET message of at most `maximumMessage` bytes. A request is an op
/// byte and its fields; a reply is a status (an OSStatus's bit pattern, 0 for success), a message
/// for people, and the op's fields. Every length and count is checked against what is left and
/// against a cap before anything is allocated, so a hostile peer gets an error, never a crash or
/// a large allocation.
///
/// The client and the broker come from the same build (one package installs both): the wire has
/// no version, and a change to it (the generation fields of `state` and the item requests) needs
/// both replaced together.
package enum BrokerWire {
    package static let maximumMessage = 1 << 20
    /// Caps on counts: a keybag has about a dozen fields, a log page a few hundred entries.
    static let maximumFields = 64
    static let maximumEntries = 4096
    static let maximumWarnings = 64
    /// Rows of a rotation per message: a row is at least a few dozen bytes.
    static let maximumRows = 1 << 15
    /// An op byte with this bit set carries a u32 uid after it: a request made by root for a user
    /// (the broker ignores it from anyone else).
    static let onBehalfBit: UInt8 = 0x80
    /// The bits of an unwrap's op byte that say a deputy relays it (`RelayMarks`).
    static let relayBits: UInt8 = RelayMarks.all.rawValue
    /// The status of a reply that asks the person first (`BrokerReply.question`).
    package static let questionStatus: UInt32 = 1
    /// The status of a reply refusing an item request whose generation is not that of the keys
    /// held now (`BrokerReply.stale`).
    package static let staleStatus: UInt32 = 2
    /// The status of a reply telling the client that another process asks the person the same
    /// question now: ask again shortly, and share its answer (`BrokerReply.wait`).
    package static let waitStatus: UInt32 = 3
    /// The status of a message the broker sends unasked: the keys it holds for one of this
    /// uid's keychains changed (a lock, an unlock, an idle timeout, a rotation, a forget). A
    /// client that finds none waiting knows that the state it was last given still holds, and
    /// reads attributes with it without asking again (`BrokerConnection.isUnchanged(since:)`).
    /// At most one waits per connection: the broker sends another only after the next request.
    package static let noticeStatus: UInt32 = 4

    package static let notice: Bytes = {
        var w = ByteWriter(capacity: 8)
        w.u32(noticeStatus)
        w.string("")
        return w.bytes
    }()
}

package enum BrokerOp: UInt8, Sendable, CaseIterable {
    case state = 1
    case unlock = 2
    case verify = 3
    case lock = 4
    case changePassword = 5
    case settingsMAC = 6
    case wrap = 7
    case unwrap = 8
    case checkBinding = 9
    case whoAmI = 10
    case accessLog = 11
    case forget = 12
    /// Not in the first list of ops: every WhenUnlocked key of the caller's uid (the PAM module's
    /// last-session lock, `security lock-keychain -a`).
    case lockAll = 13
    /// A new keychain's keybag, made and kept in the broker (`KeyCustodian.create`).
    case create = 14
    /// A rotation (`KeyCustodian.beginRotation`, `rotate`, `commitRotation`).
    case rotateBegin = 15
    case rotateRows = 16
    case rotateCommit = 17
    /// A login session of a user opened or closed, or their count asked: the PAM module's, as
    /// root for the user (`onBehalfBit`), so that the count that decides the last session's
    /// lock is out of the user's reach (it was in their kernel keyring).
    case session = 18
}

/// What the PAM module tells the broker of a user's sessions.
package enum SessionEvent: UInt8, Sendable {
    case opened = 1
    case closed = 2
    /// Only the count, unchanged.
    case count = 3
}

/// The person's answer as a request carries it (0 none, 1 deny, 2 once, 3 always).
package enum WireAnswer: UInt8, Sendable {
    case none = 0
    case deny = 1
    case once = 2
    case always = 3
}

package enum BrokerRequest: Sendable {
    case state(CustodyKeybag)
    case unlock(CustodyKeybag, password: Bytes)
    case verify(CustodyKeybag, password: Bytes)
    case lock(CustodyKeybag)
    case changePassword(CustodyKeybag, old: Bytes, new: Bytes, scrypt: ScryptParameters)
    case settingsMAC(CustodyKeybag, settings: Bytes, password: Bytes?)
    case wrap(ItemKeyRequest, itemKey: Bytes)
    case unwrap(ItemKeyRequest, interaction: CustodyInteraction, answer: WireAnswer, password: Bytes)
    case checkBinding(ItemKeyRequest)
    case whoAmI
    case accessLog(since: UInt64)
    case forget(path: String, password: Bytes)
    case lockAll
    case create(path: String, password: Bytes, scrypt: ScryptParameters)
    case rotateBegin(CustodyKeybag, password: Bytes, newPassword: Bytes?, scrypt: ScryptParameters)
    case rotateRows(keychain: Bytes, rows: [Row])
    case rotateCommit(CustodyKeybag)
    /// Counted per login keychain (its path): a user deleted and another made with the same uid
    /// (a new home) starts at none, whatever the first left open.
    case session(SessionEvent, path: String)

    package var op: BrokerOp {
        switch self {
        case .state: return .state
        case .unlock: return .unlock
        case .verify: return .verify
        case .lock: return .lock
        case .changePassword: return .changePassword
        case .settingsMAC: return .settingsMAC
        case .wrap: return .wrap
        case .unwrap: return .unwrap
        case .checkBinding: return .checkBinding
        case .whoAmI: return .whoAmI
        case .accessLog: return .accessLog
        case .forget: return .forget
        case .lockAll: return .lockAll
        case .create: return .create
        case .rotateBegin: return .rotateBegin
        case .rotateRows: return .rotateRows
        case .rotateCommit: return .rotateCommit
        case .session: return .session
        }
    }

    /// The request's bytes; `onBehalfOf` a uid (root's requests for a user only).
    package func encoded(onBehalfOf uid: UInt32? = nil, relay: RelayMarks = []) -> Bytes {
        var w = ByteWriter(capacity: 256)
        if let uid {
            w.u8(op.rawValue | BrokerWire.onBehalfBit | relay.rawValue)
            w.u32(uid)
        } else {
            w.u8(op.rawValue | relay.rawValue)
        }
        switch self {
        case .state(let keybag), .lock(let keybag):
            w.keybag(keybag)
        case .unlock(let keybag, let password), .verify(let keybag, let password):
            w.keybag(keybag)
            w.blob(password)
        case .changePassword(let keybag, let old, let new, let scrypt):
            w.keybag(keybag)
            w.blob(old)
            w.blob(new)
            w.u64(scrypt.n)
            w.u64(scrypt.r)
            w.u64(scrypt.p)
        case .settingsMAC(let keybag, let settings, let password):
            w.keybag(keybag)
            w.blob(settings)
            w.u8(password == nil ? 0 : 1)
            w.blob(password ?? [])
        case .wrap(let request, let itemKey):
            w.itemKeyRequest(request)
            w.blob(itemKey)
        case .unwrap(let request, let interaction, let answer, let password):
            w.itemKeyRequest(request)
            w.u8(interaction == .allowed ? 1 : 0)
            w.u8(answer.rawValue)
            w.blob(password)
        case .checkBinding(let request):
            w.itemKeyRequest(request)
        case .whoAmI, .lockAll:
            break
        case .accessLog(let since):
            w.u64(since)
        case .forget(let path, let password):
            w.string(path)
            w.blob(password)
        case .create(let path, let password, let scrypt):
            w.string(path)
            w.blob(password)
            w.u64(scrypt.n)
            w.u64(scrypt.r)
            w.u64(scrypt.p)
        case .rotateBegin(let keybag, let password, let newPassword, let scrypt):
            w.keybag(keybag)
            w.blob(password)
            w.u8(newPassword == nil ? 0 : 1)
            w.blob(newPassword ?? [])
            w.u64(scrypt.n)
            w.u64(scrypt.r)
            w.u64(scrypt.p)
        case .rotateRows(let keychain, let rows):
            w.blob(keychain)
            w.rows(rows)
        case .rotateCommit(let keybag):
            w.keybag(keybag)
        case .session(let event, let path):
            w.u8(event.rawValue)
            w.string(path)
        }
        return w.bytes
    }

    /// A request and the uid it names (root's only), or a decode error for anything malformed:
    /// an unknown op, a short or long message, a count over its cap, a field out of range.
    package static func decode(_ bytes: Bytes) throws -> (request: BrokerRequest, onBehalfOf: UInt32?) {
        guard bytes.count <= BrokerWire.maximumMessage else { throw KeychainError.decode("request too long") }
        var r = ByteReader(bytes)
        let first = try r.u8()
        var uid: UInt32?
        if first & BrokerWire.onBehalfBit != 0 { uid = try r.u32() }
        guard let op = BrokerOp(rawValue: first & ~BrokerWire.onBehalfBit & ~BrokerWire.relayBits) else {
            throw KeychainError.decode("unknown request \(first)")
        }
        try RelayMarks.check(first, op: op)
        let request: BrokerRequest
        switch op {
        case .state: request = .state(try r.keybag())
        case .unlock: request = .unlock(try r.keybag(), password: try r.blob())
        case .verify: request = .verify(try r.keybag(), password: try r.blob())
        case .lock: request = .lock(try r.keybag())
        case .changePassword:
            let keybag = try r.keybag(), old = try r.blob(), new = try r.blob()
            let scrypt = ScryptParameters(n: try r.u64(), r: try r.u64(), p: try r.u64())
            request = .changePassword(keybag, old: old, new: new, scrypt: scrypt)
        case .settingsMAC:
            let keybag = try r.keybag(), settings = try r.blob()
            let present = try r.u8(), password = try r.blob()
            guard present <= 1 else { throw KeychainError.decode("bad flag") }
            request = .settingsMAC(keybag, settings: settings, password: present == 1 ? password : nil)
        case .wrap: request = .wrap(try r.itemKeyRequest(), itemKey: try r.blob())
        case .unwrap:
            let item = try r.itemKeyRequest()
            let interaction = try r.u8()
            guard interaction <= 1, let answer = WireAnswer(rawValue: try r.u8()) else { throw KeychainError.decode("bad flag") }
            request = .unwrap(item, interaction: interaction == 1 ? .allowed : .notAllowed, answer: answer, password: try r.blob())
        case .checkBinding: request = .checkBinding(try r.itemKeyRequest())
        case .whoAmI: request = .whoAmI
        case .accessLog: request = .accessLog(since: try r.u64())
        case .forget: request = .forget(path: try r.string(), password: try r.blob())
        case .lockAll: request = .lockAll
        case .create:
            let path = try r.string(), password = try r.blob()
            request = .create(path: path, password: password, scrypt: ScryptParameters(n: try r.u64(), r: try r.u64(), p: try r.u64()))
        case .rotateBegin:
            let keybag = try r.keybag(), password = try r.blob()
            let present = try r.u8(), newPassword = try r.blob()
            guard present <= 1 else { throw KeychainError.decode("bad flag") }
            let scrypt = ScryptParameters(n: try r.u64(), r: try r.u64(), p: try r.u64())
            request = .rotateBegin(keybag, password: password, newPassword: present == 1 ? newPassword : nil, scrypt: scrypt)
        case .rotateRows: request = .rotateRows(keychain: try r.blob(), rows: try r.rows())
        case .rotateCommit: request = .rotateCommit(try r.keybag())
        case .session:
            guard let event = SessionEvent(rawValue: try r.u8()) else { throw KeychainError.decode("bad session event") }
            request = .session(event, path: try r.string())
        }
        guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in request") }
        return (request, uid)
    }
}

/// Who the broker sees at the other end (`whoAmI`).
package struct CallerDescription: Sendable, Equatable {
    package var summary: String
    /// The access-list entry the caller would be given ("" when it cannot be identified).
    package var entry: String
    package var warnings: [String]

    package init(summary: String, entry: String, warnings: [String]) {
        self.summary = summary
        self.entry = entry
        self.warnings = warnings
    }
}

/// One line of the access log: a key given out or refused.
package struct AccessLogEntry: Sendable, Equatable {
    package var time: UInt64
    package var uid: UInt32
    package var keychain: String
    package var itemClass: String
    package var label: String
    package var service: String
    package var account: String
    package var caller: String
    package var chain: String
    package var decision: String

    package init(
        time: UInt64, uid: UInt32, keychain: String, itemClass: String, label: String, service: String, account: String,
        caller: String, chain: String, decision: String
    ) {
        self.time = time
        self.uid = uid
        self.keychain = keychain
        self.itemClass = itemClass
        self.label = label
        self.service = service
        self.account = account
        self.caller = caller
        self.chain = chain
        self.decision = decision
    }

    func write(to w: inout ByteWriter) {
        w.u64(time)
        w.u32(uid)
        for text in [keychain, itemClass, label, service, account, caller, chain, decision] { w.string(text) }
    }

    static func read(from r: inout ByteReader) throws -> AccessLogEntry {
        let time = try r.u64(), uid = try r.u32()
        return AccessLogEntry(
            time: time, uid: uid, keychain: try r.string(), itemClass: try r.string(), label: try r.string(),
            service: try r.string(), account: try r.string(), caller: try r.string(), chain: try r.string(),
            decision: try r.string())
    }
}

/// A reply's fields, by op. `failure` carries any status other than success and the question.
package enum BrokerReply: Sendable {
    case done
    case state(CustodyState)
    case fields([String: Bytes])
    case bytes(Bytes)
    case key(Bytes, alwaysEntry: String)
    case question(String)
    /// The request's generation is not the keys' (`CustodyGenerationChanged`).
    case stale
    /// Another process of the same program is asking the person about the same item.
    case wait
    case caller(CallerDescription)
    case log([AccessLogEntry])
    case rotation(CustodyRotation)
    case rows([Row])
    /// An unlock: whether it was the keychain's first in the broker (`KeyCustodian.unlock`).
    case unlocked(first: Bool)
    /// A user's sessions open, after the event (`session`).
    case sessions(UInt32)
    case failure(KeychainError)

    package func encoded() -> Bytes {
        var w = ByteWriter(capacity: 128)
        switch self {
        case .failure(let error):
            w.u32(UInt32(bitPattern: error.code.rawValue))
            w.string(String(error.detail.prefix(1000)))
            return w.bytes
        case .question(let text):
            w.u32(BrokerWire.questionStatus)
            w.string(text)
            return w.bytes
        case .stale:
            w.u32(BrokerWire.staleStatus)
            w.string("the keychain's keys changed since the client's state")
            return w.bytes
        case .wait:
            w.u32(BrokerWire.waitStatus)
            w.string("the person is being asked the same question for another process")
            return w.bytes
        default:
            w.u32(0)
            w.string("")
        }
        switch self {
        case .done, .failure, .question, .stale, .wait: break
        case .state(let state):
            w.subkeys(state.open)
            w.u8(state.settingsVerified == nil ? 0 : state.settingsVerified == true ? 1 : 2)
            w.u64(state.generation)
        case .rotation(let rotation):
            w.fields(rotation.fields)
            w.subkeys(rotation.open)
        case .rows(let rows):
            w.rows(rows)
        case .unlocked(let first):
            w.u8(first ? 1 : 0)
        case .sessions(let count):
            w.u32(count)
        case .fields(let fields):
            w.fields(fields)
        case .bytes(let bytes):
            w.blob(bytes)
        case .key(let key, let entry):
            w.blob(key)
            w.string(entry)
        case .caller(let caller):
            w.string(caller.summary)
            w.string(caller.entry)
            w.u32(UInt32(caller.warnings.count))
            for warning in caller.warnings { w.string(warning) }
        case .log(let entries):
            w.u32(UInt32(entries.count))
            for entry in entries { entry.write(to: &w) }
        }
        return w.bytes
    }

    /// The reply to a request of `op`; a status other than success or the question becomes
    /// `.failure` with the broker's message.
    package static func decode(_ bytes: Bytes, for op: BrokerOp) throws -> BrokerReply {
        guard bytes.count <= BrokerWire.maximumMessage else { throw KeychainError.decode("reply too long") }
        var r = ByteReader(bytes)
        let status = try r.u32(), message = try r.string()
        if status == BrokerWire.questionStatus {
            guard op == .unwrap, r.isAtEnd else { throw KeychainError.decode("unexpected question") }
            return .question(message)
        }
        if status == BrokerWire.waitStatus {
            guard op == .unwrap, r.isAtEnd else { throw KeychainError.decode("unexpected wait reply") }
            return .wait
        }
        if status == BrokerWire.staleStatus {
            guard op == .unwrap || op == .checkBinding || op == .wrap, r.isAtEnd else { throw KeychainError.decode("unexpected stale reply") }
            return .stale
        }
        if status != 0 {
            guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in reply") }
            let code = KeychainError.Code(rawValue: Int32(bitPattern: status)) ?? .authFailed
            return .failure(KeychainError(code, message))
        }
        let reply: BrokerReply
        switch op {
        case .verify, .lock, .checkBinding, .forget, .lockAll, .rotateCommit: reply = .done
        case .unlock:
            let first = try r.u8()
            guard first <= 1 else { throw KeychainError.decode("bad flag") }
            reply = .unlocked(first: first == 1)
        case .rotateBegin: reply = .rotation(CustodyRotation(fields: try r.fields(), open: try r.subkeys()))
        case .rotateRows: reply = .rows(try r.rows())
        case .session: reply = .sessions(try r.u32())
        case .state:
            let open = try r.subkeys()
            let settings = try r.u8()
            guard settings <= 2 else { throw KeychainError.decode("bad settings state") }
            reply = .state(CustodyState(open: open, settingsVerified: settings == 0 ? nil : settings == 1, generation: try r.u64()))
        case .changePassword, .create: reply = .fields(try r.fields())
        case .settingsMAC, .wrap: reply = .bytes(try r.blob())
        case .unwrap: reply = .key(try r.blob(), alwaysEntry: try r.string())
        case .whoAmI:
            let summary = try r.string(), entry = try r.string()
            let count = Int(try r.u32())
            guard count <= BrokerWire.maximumWarnings else { throw KeychainError.decode("too many warnings") }
            var warnings: [String] = []
            for _ in 0..<count { warnings.append(try r.string()) }
            reply = .caller(CallerDescription(summary: summary, entry: entry, warnings: warnings))
        case .accessLog:
            let count = Int(try r.u32())
            guard count <= BrokerWire.maximumEntries else { throw KeychainError.decode("too many entries") }
            var entries: [AccessLogEntry] = []
            for _ in 0..<count { entries.append(try AccessLogEntry.read(from: &r)) }
            reply = .log(entries)
        }
        guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in reply") }
        return reply
    }
}

extension ByteWriter {
    mutating func subkeys(_ subkeys: [LockClass: ClientSubkeys]) {
        let open = subkeys.sorted { $0.key.rawValue < $1.key.rawValue }
        u8(UInt8(open.count))
        for (lockClass, keys) in open {
            u8(UInt8(lockClass.rawValue))
            blob(keys.metadata)
            blob(keys.index)
        }
    }

    mutating func rows(_ rows: [Row]) {
        u32(UInt32(rows.count))
        for row in rows {
            u64(UInt64(bitPattern: row.rowID))
            u8(UInt8(row.itemClass.code))
            u8(UInt8(row.lockClass.rawValue))
            blob(row.metadata)
            blob(row.secret)
        }
    }

    mutating func keybag(_ keybag: CustodyKeybag) {
        blob(keybag.uuid)
        string(keybag.path)
        fields(keybag.fields)
    }

    mutating func fields(_ fields: [String: Bytes]) {
        u32(UInt32(fields.count))
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
            string(name)
            blob(value)
        }
    }

    mutating func itemKeyRequest(_ request: ItemKeyRequest) {
        blob(request.keychain)
        u64(UInt64(bitPattern: request.rowID))
        u8(UInt8(request.itemClass.code))
        u8(UInt8(request.lockClass.rawValue))
        blob(request.metadata)
        blob(request.wrappedKey)
        u64(request.generation)
    }
}

extension ByteReader {
    mutating func subkeys() throws -> [LockClass: ClientSubkeys] {
        let count = Int(try u8())
        guard count <= LockClass.allCases.count else { throw KeychainError.decode("too many classes") }
        var open: [LockClass: ClientSubkeys] = [:]
        for _ in 0..<count {
            guard let lockClass = LockClass(rawValue: Int64(try u8())), open[lockClass] == nil else {
                throw KeychainError.decode("bad class")
            }
            open[lockClass] = ClientSubkeys(metadata: try blob(), index: try blob())
        }
        return open
    }

    mutating func rows() throws -> [Row] {
        let count = Int(try u32())
        guard count <= BrokerWire.maximumRows else { throw KeychainError.decode("too many rows") }
        var rows: [Row] = []
        for _ in 0..<count {
            let rowID = Int64(bitPattern: try u64())
            guard let itemClass = ItemClass(code: Int64(try u8())), let lockClass = LockClass(rawValue: Int64(try u8())) else {
                throw KeychainError.decode("bad item or lock class")
            }
            rows.append(
                Row(rowID: rowID, itemClass: itemClass, lockClass: lockClass, space: KeySpace(lockClass), metadata: try blob(), secret: try blob()))
        }
        return rows
    }

    mutating func keybag() throws -> CustodyKeybag {
        let uuid = try blob(), path = try string()
        return CustodyKeybag(uuid: uuid, fields: try fields(), path: path)
    }

    mutating func fields() throws -> [String: Bytes] {
        let count = Int(try u32())
        guard count <= BrokerWire.maximumFields else { throw KeychainError.decode("too many keybag fields") }
        var fields: [String: Bytes] = [:]
        for _ in 0..<count {
            let name = try string()
            guard fields[name] == nil else { throw KeychainError.decode("a keybag field twice") }
            fields[name] = try blob()
        }
        return fields
    }

    mutating func itemKeyRequest() throws -> ItemKeyRequest {
        let keychain = try blob()
        let rowID = Int64(bitPattern: try u64())
        guard let itemClass = ItemClass(code: Int64(try u8())), let lockClass = LockClass(rawValue: Int64(try u8())) else {
            throw KeychainError.decode("bad item or lock class")
        }
        let metadata = try blob(), wrappedKey = try blob()
        return ItemKeyRequest(
            keychain: keychain, rowID: rowID, itemClass: itemClass, lockClass: lockClass, metadata: metadata, wrappedKey: wrappedKey,
            generation: try u64())
    }
}
