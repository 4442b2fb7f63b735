import KeychainCore
import Glibc

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
        w.u32(state.permanent)
    }

    static func readLockout(_ r: inout ByteReader) throws -> TPMLockoutState? {
        guard try r.u8() == 1 else { return nil }
        return TPMLockoutState(
            inLockout: try r.u8() == 1, failures: try r.u32(), maximum: try r.u32(), interval: try r.u32(), permanent: try r.u32())
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
        case "seal", "seal-pcr", "seal-auth-pcr":
            // The request's fields in order: the secret, the password unless sealed to PCRs
            // alone, the PCRs unless sealed to a password alone.
            var secret = try r.blob()
            var auth = operation == "seal-pcr" ? Bytes() : try r.blob()
            defer { secret.wipe(); auth.wipe() }
            let pcrs = operation == "seal" ? Bytes() : try r.blob()
            try finish(&r)
            guard operation == "seal" || PCRSelection.isValid(pcrs) else { throw TPMFailure.failed("malformed request") }
            let record =
                switch operation {
                case "seal": try tpm.seal(secret, auth: auth)
                case "seal-pcr": try tpm.seal(secret, toPCRs: pcrs)
                default: try tpm.seal(secret, auth: auth, pcrs: pcrs)
                }
            w.blob(record.primaryName)
            w.blob(record.sealedPublic)
            w.blob(record.sealedPrivate)
        case "unseal", "unseal-pcr", "unseal-auth-pcr":
            let record = try TPMSealedSecret(bytes: try r.blob())
            var auth = operation == "unseal-pcr" ? Bytes() : try r.blob()
            defer { auth.wipe() }
            let pcrs = operation == "unseal" ? Bytes() : try r.blob()
            let length = Int(try r.u32())
            try finish(&r)
            guard length <= 256, operation == "unseal" || PCRSelection.isValid(pcrs) else { throw TPMFailure.failed("malformed request") }
            var secret =
                switch operation {
                case "unseal": try tpm.unseal(record, auth: auth, length: length)
                case "unseal-pcr": try tpm.unseal(record, pcrs: pcrs, length: length)
                default: try tpm.unseal(record, auth: auth, pcrs: pcrs, length: length)
                }
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
        case TPMSigningWire.create, TPMSigningWire.sign:
            try TPMSigningWire.serve(operation, &r, tpm, &w, finish: finish)
        default:
            throw TPMFailure.failed("unknown operation")
        }
        return w.bytes
    }
}
