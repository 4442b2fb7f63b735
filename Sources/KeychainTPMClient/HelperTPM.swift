import KeychainCore
import KeychainProcess
internal import CLinux
import Glibc

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
    func exchange<T>(_ request: inout ByteWriter, _ parse: (inout ByteReader) throws -> T) throws -> T {
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
