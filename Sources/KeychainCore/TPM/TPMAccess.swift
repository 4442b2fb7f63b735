import Glibc

/// The three things a keychain asks of a TPM, done by `keychain-tpm-helper` in a process of its
/// own (`HelperTPM`), through tpm2-tss (Sources/KeychainTPM, the helper's only user). The engine
/// itself never links tpm2-tss: the tools are fully static and Debian ships no static tpm2-tss,
/// and dlopen in a static program gives the library a second C library whose thread-specific
/// data collides with the program's (libcrypto crashed in Esys_CreatePrimary). A process of its
/// own is worth having anyway: tpm2-tss's synchronous calls wait for the TPM without end, so only
/// a process that can be killed bounds what a TPM (or a TCTI) that stops answering costs, and
/// whatever tpm2-tss does with a malformed answer happens outside the caller.
package protocol TPMOperations {
    /// Seals `secret` under the owner hierarchy's storage key for `auth`, checks that it unseals.
    func seal(_ secret: Bytes, auth: Bytes) throws -> TPMSealedSecret
    /// The sealed secret for `auth`, if the TPM is the one recorded and accepts `auth`.
    func unseal(_ record: TPMSealedSecret, auth: Bytes, length: Int) throws -> Bytes
    /// The TPM, and whether its storage key is the one named `primaryName` (nil: not asked).
    func describe(primaryName: Bytes?) throws -> (TPMDescription, sealedHere: Bool?)
    /// Seals `secret` under the storage key with a policy of the current values of the SHA-256
    /// PCRs `pcrs` (no authorization value, no dictionary-attack count), checks that it unseals.
    func seal(_ secret: Bytes, toPCRs pcrs: [UInt8]) throws -> TPMSealedSecret
    /// The secret sealed by `seal(_:toPCRs:)`, if those PCRs still hold the values sealed to
    /// (`TPMFailure.bootState` when not).
    func unseal(_ record: TPMSealedSecret, pcrs: [UInt8], length: Int) throws -> Bytes
    /// Seals `secret` with a policy of both the current values of the SHA-256 PCRs `pcrs` and the
    /// authorization value `auth` (each wrong one counted by the TPM), checks that it unseals.
    func seal(_ secret: Bytes, auth: Bytes, pcrs: [UInt8]) throws -> TPMSealedSecret
    /// The secret sealed by `seal(_:auth:pcrs:)`: `TPMFailure.bootState` when the PCRs changed
    /// (not counted), `.authorization` for a wrong `auth` (counted).
    func unseal(_ record: TPMSealedSecret, auth: Bytes, pcrs: [UInt8], length: Int) throws -> Bytes
    /// The keychain's rollback counter: an NV counter index opened by `request.auth`.
    func counter(_ request: TPMCounterRequest) throws -> TPMCounterAnswer
    /// The current values of the SHA-256 PCRs `pcrs`, in their order (32 bytes each): compared
    /// with the boot event log when a PCR policy fails (`BootStateDiagnosis`).
    func readPCRs(_ pcrs: [UInt8]) throws -> [Bytes]
}

extension TPMOperations {
    package func readPCRs(_ pcrs: [UInt8]) throws -> [Bytes] { throw TPMFailure.unavailable("this TPM does not say its PCRs' values") }
}

/// What is asked of a keychain's NV counter (RollbackCounter.swift).
package struct TPMCounterRequest: Equatable {
    package enum Action: Equatable {
        /// The first candidate index holding a counter that `auth` opens, and its value.
        case find
        /// A new counter at the first free candidate, incremented once.
        case create
        /// +1 if the counter at `index` holds `expected`; its value after either way.
        case increment(index: UInt32, expected: UInt64)
        /// Undefined, if it is the keychain's.
        case remove(index: UInt32)
        /// As `find`, preferring the counter that agrees with the file's count `expected` (at it,
        /// or one behind), then a protected one; where a protected one is chosen, a counter of
        /// the earlier kind also opened by `auth` (a migration cut short) is undefined.
        case findMatching(expected: UInt64)
        /// The counter at `index`, of the earlier kind (the owner's) and at `expected`, given a
        /// protected successor: a protected counter of the keychain already there (a migration cut
        /// short), else a new one, if the platform hierarchy allows; `.none` where it does not.
        /// The old counter stays: the caller records the new count in the file first.
        case migrate(index: UInt32, expected: UInt64)
    }

    package var action: Action
    package var auth: Bytes
    package var candidates: [UInt32]

    package init(_ action: Action, auth: Bytes, candidates: [UInt32]) {
        self.action = action
        self.auth = auth
        self.candidates = candidates
    }
}

package struct TPMCounterAnswer: Equatable {
    /// index 0: no counter (find found none; remove).
    package var index: UInt32
    package var value: UInt64
    /// The platform's, with TPMA_NV_POLICY_DELETE: no one else with the TPM can undefine it.
    package var protected: Bool
    package static let none = TPMCounterAnswer(index: 0, value: 0)

    package init(index: UInt32, value: UInt64, protected: Bool = false) {
        self.index = index
        self.value = value
        self.protected = protected
    }
}

enum TPMAccess {
    /// Unit tests put an in-memory TPM here (one that answers wrongly, too); nil everywhere else.
    nonisolated(unsafe) static var simulated: ((TPMConfiguration) -> TPMOperations)?

    /// Where this process reaches the TPM of `configuration`. Throws `TPMFailure.unavailable`.
    static func operations(_ configuration: TPMConfiguration) throws -> TPMOperations {
        guard configuration.tcti != nil else { throw TPMFailure.unavailable(configuration.absence) }
        if let simulated { return simulated(configuration) }
        guard let helper = configuration.helper.map({ HelperTPM.acceptable($0) ? $0 : "" }) ?? HelperTPM.locate(), !helper.isEmpty else {
            throw TPMFailure.unavailable("\(HelperTPM.name) is not installed (this program reaches the TPM through it)")
        }
        return HelperTPM(configuration: configuration, path: helper)
    }
}

/// The same operations, run by `keychain-tpm-helper` in a process of its own: a request on its
/// standard input, one answer on its standard output (`TPMHelperWire`), then it exits. The helper
/// is looked for beside this program's executable, in ../libexec from it, then in /usr/libexec
/// and /usr/local/libexec (the PAM module runs inside sshd or login), never on $PATH, and only
/// a file that no one but its owner can change is run; it is started with a fixed environment
/// and told the TCTI explicitly.
struct HelperTPM: TPMOperations {
    static let name = "keychain-tpm-helper"
    /// The longest one command may wait for the TPM, all its operations together (`TPMDeadline`;
    /// a real TPM makes a P-256 key and unseals in about a second, swtpm in milliseconds): each
    /// helper ends itself at what is left (`alarm`), whatever became of its caller, which stops
    /// waiting a second later. $KEYCHAIN_TPM_TIMEOUT may lower it (tests of a TPM that stops
    /// answering), never raise it.
    static let longest: UInt32 = 30
    static var timeout: UInt32 {
        guard let text = KeychainFile.environment("KEYCHAIN_TPM_TIMEOUT"), let seconds = UInt32(text), seconds > 0 else { return longest }
        return min(seconds, longest)
    }

    let configuration: TPMConfiguration
    let path: String

    static func gaveUp(_ limit: UInt32) -> TPMFailure {
        .failed("the TPM did not answer within \(limit) s (the most one command may wait for it, all its TPM operations together)")
    }

    static func locate() -> String? {
        var candidates = ["/usr/libexec/" + name, "/usr/local/libexec/" + name]
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if n > 0 {
            let executable = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let folder = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            candidates.insert(contentsOf: [folder + "/" + name, folder + "/../libexec/" + name], at: 0)
        }
        return candidates.first(where: acceptable)
    }

    /// A file that no one but its owner (root, or this process's user) can change.
    static func acceptable(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG && st.st_mode & 0o022 == 0
            && (st.st_uid == 0 || st.st_uid == geteuid()) && access(path, X_OK) == 0
    }

    func seal(_ secret: Bytes, auth: Bytes) throws -> TPMSealedSecret {
        var request = TPMHelperWire.request("seal", configuration)
        request.blob(secret)
        request.blob(auth)
        return try exchange(&request) { try Self.readSealedRecord(&$0) }
    }

    func unseal(_ record: TPMSealedSecret, auth: Bytes, length: Int) throws -> Bytes {
        var request = TPMHelperWire.request("unseal", configuration)
        request.blob(record.bytes)
        request.blob(auth)
        request.u32(UInt32(length))
        return try exchange(&request) { try Self.readSecret(&$0, length: length) }
    }

    func seal(_ secret: Bytes, toPCRs pcrs: [UInt8]) throws -> TPMSealedSecret {
        var request = TPMHelperWire.request("seal-pcr", configuration)
        request.blob(secret)
        request.blob(pcrs)
        return try exchange(&request) { try Self.readSealedRecord(&$0) }
    }

    func unseal(_ record: TPMSealedSecret, pcrs: [UInt8], length: Int) throws -> Bytes {
        var request = TPMHelperWire.request("unseal-pcr", configuration)
        request.blob(record.bytes)
        request.blob(pcrs)
        request.u32(UInt32(length))
        return try exchange(&request) { try Self.readSecret(&$0, length: length) }
    }

    func seal(_ secret: Bytes, auth: Bytes, pcrs: [UInt8]) throws -> TPMSealedSecret {
        var request = TPMHelperWire.request("seal-auth-pcr", configuration)
        request.blob(secret)
        request.blob(auth)
        request.blob(pcrs)
        return try exchange(&request) { try Self.readSealedRecord(&$0, pcrs: pcrs) }
    }

    func unseal(_ record: TPMSealedSecret, auth: Bytes, pcrs: [UInt8], length: Int) throws -> Bytes {
        var request = TPMHelperWire.request("unseal-auth-pcr", configuration)
        request.blob(record.bytes)
        request.blob(auth)
        request.blob(pcrs)
        request.u32(UInt32(length))
        return try exchange(&request) { try Self.readSecret(&$0, length: length) }
    }

    func readPCRs(_ pcrs: [UInt8]) throws -> [Bytes] {
        var request = TPMHelperWire.request("pcr-read", configuration)
        request.blob(pcrs)
        return try exchange(&request) { reply in
            let values = try pcrs.map { _ in try reply.blob() }
            guard reply.isAtEnd, values.allSatisfy({ $0.count == 32 }) else { throw TPMFailure.failed("\(Self.name) answered something unexpected") }
            return values
        }
    }

    /// A seal request's answer: the record the helper sealed, nothing after it. The PCRs are the
    /// request's own; the helper does not answer them.
    private static func readSealedRecord(_ reply: inout ByteReader, pcrs: [UInt8] = []) throws -> TPMSealedSecret {
        let record = TPMSealedSecret(primaryName: try reply.blob(), sealedPublic: try reply.blob(), sealedPrivate: try reply.blob(), pcrs: pcrs)
        guard reply.isAtEnd else { throw TPMFailure.failed("\(name) answered more than expected") }
        return record
    }

    /// An unseal request's answer: a secret of exactly `length` bytes; one of another length is
    /// wiped, not handed on.
    private static func readSecret(_ reply: inout ByteReader, length: Int) throws -> Bytes {
        var secret = try reply.blob()
        guard reply.isAtEnd, secret.count == length else {
            secret.wipe()
            throw TPMFailure.failed("\(name) answered a secret of the wrong length")
        }
        return secret
    }

    func counter(_ counter: TPMCounterRequest) throws -> TPMCounterAnswer {
        var request = TPMHelperWire.request("counter", configuration)
        TPMHelperWire.write(counter, &request)
        return try exchange(&request) { reply in
            let answer = TPMCounterAnswer(index: try reply.u32(), value: try reply.u64(), protected: try reply.u8() == 1)
            guard reply.isAtEnd else { throw TPMFailure.failed("\(Self.name) answered more than expected") }
            return answer
        }
    }

    func describe(primaryName: Bytes?) throws -> (TPMDescription, sealedHere: Bool?) {
        var request = TPMHelperWire.request("describe", configuration)
        request.blob(primaryName ?? [])
        return try exchange(&request) { reply in
            let tcti = try reply.string(), manufacturer = try reply.string()
            let lockout = try TPMHelperWire.readLockout(&reply)
            let here = try reply.u8()
            guard reply.isAtEnd, here <= 2 else { throw TPMFailure.failed("\(Self.name) answered something unexpected") }
            return (TPMDescription(tcti: tcti, manufacturer: manufacturer, lockout: lockout), here == 2 ? nil : here == 1)
        }
    }

    /// Sends one request and reads the answer through `parse`; a failure the helper reports
    /// becomes the same `TPMFailure` the local path throws. The request and the answer (which may
    /// hold secrets) are wiped. One socket pair is the helper's standard input and output:
    /// MSG_NOSIGNAL, so a helper that died early is an error, not a SIGPIPE.
    private func exchange<T>(_ request: inout ByteWriter, _ parse: (inout ByteReader) throws -> T) throws -> T {
        // What is left of the command's time (`TPMDeadline`); the helper's alarm, in whole
        // seconds, ends it at most a second past the deadline, and this side waits no longer.
        let limit = Self.timeout
        let deadline = TPMDeadline.deadline(limit: limit)
        let left = deadline - SystemClock.monotonic()
        guard left > 0 else { throw Self.gaveUp(limit) }
        let timeout = UInt32(min(Double(limit), max(1, left.rounded(.up))))
        request.u32(timeout)
        var bytes = request.bytes
        request = ByteWriter()
        defer { bytes.wipe() }
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw TPMFailure.unavailable("cannot start \(Self.name): \(String(cString: strerror(errno)))")
        }
        let child: ChildProcess
        do {
            child = try ChildProcess.start(path, [], stdio: (pair[1], pair[1], -1), environment: ["PATH=/usr/bin:/bin", "LC_ALL=C"])
        } catch {
            close(pair[0])
            close(pair[1])
            throw TPMFailure.unavailable("cannot start \(path)")
        }
        close(pair[1])
        var ended: Int32?
        defer {
            if ended == nil {
                close(pair[0])
                if child.wait(until: SystemClock.monotonic() + 1) == nil { child.stop() }
            }
        }
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(pair[0], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw TPMFailure.failed("\(Self.name) did not take the request") }
            sent += n
        }
        shutdown(pair[0], Int32(SHUT_WR))
        var answer = Bytes()
        var reader = ByteReader([])
        defer {
            reader = ByteReader([])
            answer.wipe()
        }
        var chunk = Bytes(repeating: 0, count: 4096)
        defer { chunk.wipe() }
        while answer.count <= TPMHelperWire.limit {
            var poller = pollfd(fd: pair[0], events: Int16(POLLIN), revents: 0)
            let remaining = Int32(max(0, (deadline + 1 - SystemClock.monotonic()) * 1000))
            guard remaining > 0 else { throw Self.gaveUp(limit) }
            let ready = poll(&poller, 1, remaining)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            let n = read(pair[0], &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            answer.append(contentsOf: chunk[0..<n])
        }
        close(pair[0])
        ended =
            child.wait(until: SystemClock.monotonic() + 1)
            ?? {
                child.stop()
                return 128 + SIGKILL
            }()
        if answer.isEmpty, let status = ended {
            if status == 128 + SIGALRM { throw Self.gaveUp(limit) }
            // The dynamic loader's status when a library is missing: tpm2-tss is not installed.
            if status == 127 { throw TPMFailure.unavailable("\(Self.name) cannot run (is tpm2-tss installed? libtss2-esys, -tctildr, -mu)") }
            throw TPMFailure.failed("\(Self.name) ended without an answer (\(status > 128 ? "signal \(status - 128)" : "exit status \(status)"))")
        }
        reader = try TPMHelperWire.readReply(answer)
        do {
            return try parse(&reader)
        } catch let error as KeychainError {
            throw TPMFailure.failed("\(Self.name) answered something malformed (\(error.detail))")
        }
    }
}

/// Which PCRs (SHA-256 bank) an object is sealed to: 1 to 8 distinct indices below 24, in
/// ascending order, as the keybag stores them and the helper accepts them.
package enum PCRSelection {
    /// Secure Boot's state and the keys that signed what booted: what systemd-cryptenroll seals
    /// to by default, stable across kernel updates.
    package static let standard: [UInt8] = [7]

    package static func isValid(_ pcrs: [UInt8]) -> Bool {
        (1...8).contains(pcrs.count) && pcrs.allSatisfy { $0 < 24 } && zip(pcrs, pcrs.dropFirst()).allSatisfy { $0 < $1 }
    }

    /// "7", "0,2,7": a list as the user writes it (sorted, duplicates dropped); nil if malformed.
    package static func parse(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        var values: [UInt8] = []
        for part in parts {
            guard let value = UInt8(part), value < 24 else { return nil }
            values.append(value)
        }
        let sorted = Array(Set(values)).sorted()
        return isValid(sorted) ? sorted : nil
    }

    package static func describe(_ pcrs: [UInt8]) -> String { pcrs.map { String($0) }.joined(separator: ",") }
}

/// The helper's wire format, built with the engine's ByteWriter: a request is a version, an
/// operation, the TCTI, the operation's fields and the time it may take; an answer is a status
/// byte (0: done, else a `TPMFailure`), a message, and the operation's fields.
enum TPMHelperWire {
    static let version: UInt32 = 1
    /// No request or answer is larger (a sealed object's areas are well under 2 KiB).
    static let limit = 64 * 1024

    static func request(_ operation: String, _ configuration: TPMConfiguration) -> ByteWriter {
        var w = ByteWriter()
        w.u32(version)
        w.string(operation)
        w.string(configuration.tcti ?? "")
        return w
    }

    static func write(_ counter: TPMCounterRequest, _ w: inout ByteWriter) {
        switch counter.action {
        case .find: w.u8(0); w.u32(0); w.u64(0)
        case .create: w.u8(1); w.u32(0); w.u64(0)
        case .increment(let index, let expected): w.u8(2); w.u32(index); w.u64(expected)
        case .remove(let index): w.u8(3); w.u32(index); w.u64(0)
        case .findMatching(let expected): w.u8(4); w.u32(0); w.u64(expected)
        case .migrate(let index, let expected): w.u8(5); w.u32(index); w.u64(expected)
        }
        w.blob(counter.auth)
        w.u32(UInt32(counter.candidates.count))
        for index in counter.candidates { w.u32(index) }
    }

    static func readCounter(_ r: inout ByteReader) throws -> TPMCounterRequest {
        let kind = try r.u8(), index = try r.u32(), value = try r.u64()
        let auth = try r.blob()
        let count = try r.u32()
        guard count <= 8, auth.count <= 32 else { throw TPMFailure.failed("malformed request") }
        let candidates = try (0..<count).map { _ in try r.u32() }
        // NV indices of the owner's range only (TCG's handle registry: 0x01800000-0x01BFFFFF).
        guard (candidates + ([2, 3, 5].contains(kind) ? [index] : [])).allSatisfy({ (0x0180_0000...0x01BF_FFFF).contains($0) }) else {
            throw TPMFailure.failed("malformed request")
        }
        let action: TPMCounterRequest.Action
        switch kind {
        case 0: action = .find
        case 1: action = .create
        case 2: action = .increment(index: index, expected: value)
        case 3: action = .remove(index: index)
        case 4: action = .findMatching(expected: value)
        case 5: action = .migrate(index: index, expected: value)
        default: throw TPMFailure.failed("malformed request")
        }
        return TPMCounterRequest(action, auth: auth, candidates: candidates)
    }

    static func writeLockout(_ state: TPMLockoutState?, _ w: inout ByteWriter) {
        guard let state else { return w.u8(0) }
        w.u8(1)
        w.u8(state.inLockout ? 1 : 0)
        w.u32(state.failures)
        w.u32(state.maximum)
        w.u32(state.interval)
    }

    static func readLockout(_ r: inout ByteReader) throws -> TPMLockoutState? {
        guard try r.u8() == 1 else { return nil }
        return TPMLockoutState(inLockout: try r.u8() == 1, failures: try r.u32(), maximum: try r.u32(), interval: try r.u32())
    }

    static func failure(_ failure: TPMFailure) -> Bytes {
        var w = ByteWriter()
        switch failure {
        case .unavailable(let why): w.u8(1); w.string(why)
        case .authorization(let state): w.u8(2); w.string(""); writeLockout(state, &w)
        case .lockout(let state): w.u8(3); w.string(""); writeLockout(state, &w)
        case .foreign(let why): w.u8(4); w.string(why)
        case .failed(let why): w.u8(5); w.string(why)
        case .bootState(let why): w.u8(6); w.string(why)
        }
        return w.bytes
    }

    /// The fields of a successful answer, or the failure it reports; anything malformed is a
    /// failure too (the helper is ours, but its answer is checked like the TPM's).
    static func readReply(_ answer: Bytes) throws -> ByteReader {
        guard !answer.isEmpty, answer.count <= limit else { throw TPMFailure.failed("\(HelperTPM.name) gave no answer") }
        var r = ByteReader(answer)
        do {
            let status = try r.u8()
            let message = try r.string()
            switch status {
            case 0: return r
            case 1: throw TPMFailure.unavailable(message)
            case 2: throw TPMFailure.authorization(try readLockout(&r))
            case 3: throw TPMFailure.lockout(try readLockout(&r))
            case 4: throw TPMFailure.foreign(message)
            case 6: throw TPMFailure.bootState(message)
            default: throw TPMFailure.failed(message)
            }
        } catch let error as KeychainError {
            throw TPMFailure.failed("\(HelperTPM.name) answered something malformed (\(error.detail))")
        }
    }
}

/// `keychain-tpm-helper`'s whole program: one request from standard input, the operation done
/// by `operations` (tpm2-tss, in the helper), one answer on standard output.
package enum TPMHelperService {
    package static func main(_ operations: (TPMConfiguration) -> TPMOperations) -> Int32 {
        ProcessHardening.becomeUndumpable()
        // A TPM or TCTI that stops answering must not keep this process (and what it holds) alive.
        alarm(HelperTPM.longest)
        var request = Bytes()
        defer { request.wipe() }
        var chunk = Bytes(repeating: 0, count: 4096)
        defer { chunk.wipe() }
        while request.count <= TPMHelperWire.limit {
            let n = read(0, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            request.append(contentsOf: chunk[0..<n])
        }
        var answer: Bytes
        do {
            answer = try serve(request, operations)
        } catch let failure as TPMFailure {
            answer = TPMHelperWire.failure(failure)
        } catch let error as KeychainError {
            answer = TPMHelperWire.failure(.failed("malformed request (\(error.detail))"))
        } catch {
            answer = TPMHelperWire.failure(.failed("\(error)"))
        }
        defer { answer.wipe() }
        var offset = 0
        while offset < answer.count {
            let n = answer[offset...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return 1 }
            offset += n
        }
        return 0
    }

    static func serve(_ request: Bytes, _ operations: (TPMConfiguration) -> TPMOperations) throws -> Bytes {
        guard request.count <= TPMHelperWire.limit else { throw TPMFailure.failed("request too large") }
        var r = ByteReader(request)
        guard try r.u32() == TPMHelperWire.version else { throw TPMFailure.failed("a request of another version") }
        let operation = try r.string()
        let tcti = try r.string()
        let tpm = operations(TPMConfiguration(tcti: tcti.isEmpty ? nil : tcti))
        /// The request's last field: the time the caller waits, at most `longest`.
        func finish(_ r: inout ByteReader) throws {
            let seconds = try r.u32()
            guard r.isAtEnd else { throw TPMFailure.failed("malformed request") }
            alarm(min(max(seconds, 1), HelperTPM.longest))
        }
        var w = ByteWriter()
        w.u8(0)
        w.string("")
        switch operation {
        case "seal":
            var secret = try r.blob(), auth = try r.blob()
            defer { secret.wipe(); auth.wipe() }
            try finish(&r)
            let record = try tpm.seal(secret, auth: auth)
            w.blob(record.primaryName)
            w.blob(record.sealedPublic)
            w.blob(record.sealedPrivate)
        case "unseal":
            let record = try TPMSealedSecret(bytes: try r.blob())
            var auth = try r.blob()
            defer { auth.wipe() }
            let length = Int(try r.u32())
            try finish(&r)
            guard length <= 256 else { throw TPMFailure.failed("malformed request") }
            var secret = try tpm.unseal(record, auth: auth, length: length)
            defer { secret.wipe() }
            w.blob(secret)
        case "seal-pcr":
            var secret = try r.blob()
            defer { secret.wipe() }
            let pcrs = try r.blob()
            try finish(&r)
            guard PCRSelection.isValid(pcrs) else { throw TPMFailure.failed("malformed request") }
            let record = try tpm.seal(secret, toPCRs: pcrs)
            w.blob(record.primaryName)
            w.blob(record.sealedPublic)
            w.blob(record.sealedPrivate)
        case "unseal-pcr":
            let record = try TPMSealedSecret(bytes: try r.blob())
            let pcrs = try r.blob()
            let length = Int(try r.u32())
            try finish(&r)
            guard length <= 256, PCRSelection.isValid(pcrs) else { throw TPMFailure.failed("malformed request") }
            var secret = try tpm.unseal(record, pcrs: pcrs, length: length)
            defer { secret.wipe() }
            w.blob(secret)
        case "seal-auth-pcr":
            var secret = try r.blob(), auth = try r.blob()
            defer { secret.wipe(); auth.wipe() }
            let pcrs = try r.blob()
            try finish(&r)
            guard PCRSelection.isValid(pcrs) else { throw TPMFailure.failed("malformed request") }
            let record = try tpm.seal(secret, auth: auth, pcrs: pcrs)
            w.blob(record.primaryName)
            w.blob(record.sealedPublic)
            w.blob(record.sealedPrivate)
        case "unseal-auth-pcr":
            let record = try TPMSealedSecret(bytes: try r.blob())
            var auth = try r.blob()
            defer { auth.wipe() }
            let pcrs = try r.blob()
            let length = Int(try r.u32())
            try finish(&r)
            guard length <= 256, PCRSelection.isValid(pcrs) else { throw TPMFailure.failed("malformed request") }
            var secret = try tpm.unseal(record, auth: auth, pcrs: pcrs, length: length)
            defer { secret.wipe() }
            w.blob(secret)
        case "counter":
            var counter = try TPMHelperWire.readCounter(&r)
            defer { counter.auth.wipe() }
            try finish(&r)
            let answer = try tpm.counter(counter)
            w.u32(answer.index)
            w.u64(answer.value)
            w.u8(answer.protected ? 1 : 0)
        case "pcr-read":
            let pcrs = try r.blob()
            try finish(&r)
            guard PCRSelection.isValid(pcrs) else { throw TPMFailure.failed("malformed request") }
            let values = try tpm.readPCRs(pcrs)
            guard values.count == pcrs.count else { throw TPMFailure.failed("the TPM answered other PCRs than those asked for") }
            for value in values { w.blob(value) }
        case "describe":
            let name = try r.blob()
            try finish(&r)
            let (description, here) = try tpm.describe(primaryName: name.isEmpty ? nil : name)
            w.string(description.tcti)
            w.string(description.manufacturer)
            TPMHelperWire.writeLockout(description.lockout, &w)
            w.u8(here == nil ? 2 : here! ? 1 : 0)
        default:
            throw TPMFailure.failed("unknown operation")
        }
        return w.bytes
    }
}
