internal import CLinux
import Glibc
import KeychainCore

/// The firmware's boot event log (TCG PC Client, crypto-agile format), replayed: the values the
/// SHA-256 PCRs would hold if nothing but this boot's measurements had been extended into them.
/// A PCR whose value differs was extended after boot (by anyone who can reach the TPM: group
/// `tss` can, with `tpm2_pcrextend`); one that matches holds what this boot measured.
package enum BootEventLog {
    /// The kernel's copy; root's alone on most systems (0440). $KEYCHAIN_TPM_EVENT_LOG names
    /// another file (tests; ignored in set-user-ID programs).
    package static let kernelPath = "/sys/kernel/security/tpm0/binary_bios_measurements"
    static var path: String { clinux_secure_getenv("KEYCHAIN_TPM_EVENT_LOG").map { String(cString: $0) } ?? kernelPath }
    /// A real log is tens of kilobytes; nothing larger is read.
    static let limit = 4 << 20

    private static let noAction: UInt32 = 3
    private static let sha256: UInt16 = 0x000B

    /// The replayed values of `pcrs`; nil when the log cannot be read or is not one this reads
    /// (the SHA-1-only format of old firmware, no SHA-256 bank, anything malformed).
    static func replay(_ pcrs: [UInt8], path: String = path) -> [UInt8: Bytes]? {
        guard let log = read(path) else { return nil }
        return replay(pcrs, log: log)
    }

    static func replay(_ pcrs: [UInt8], log: Bytes) -> [UInt8: Bytes]? {
        var r = LittleEndianReader(log)
        // The header: a SHA-1-format event (EV_NO_ACTION) holding the "Spec ID Event03" structure,
        // which lists the banks and their digest sizes.
        guard r.u32() != nil, r.u32() == noAction, r.skip(20), let headerSize = r.u32(), let header = r.bytes(Int(headerSize)) else { return nil }
        var h = LittleEndianReader(header)
        guard h.bytes(16) == Bytes("Spec ID Event03".utf8) + [0], h.skip(8), let banks = h.u32(), banks > 0, banks <= 16 else { return nil }
        var sizes: [UInt16: Int] = [:]
        for _ in 0..<banks {
            guard let algorithm = h.u16(), let size = h.u16() else { return nil }
            sizes[algorithm] = Int(size)
        }
        guard sizes[sha256] == 32 else { return nil }
        var values: [UInt8: Bytes] = [:]
        for pcr in pcrs { values[pcr] = Bytes(repeating: 0, count: 32) }
        while !r.isAtEnd {
            guard let index = r.u32(), let type = r.u32(), let count = r.u32(), count <= 16 else { return nil }
            var digest: Bytes?
            for _ in 0..<count {
                guard let algorithm = r.u16(), let size = sizes[algorithm], let bytes = r.bytes(size) else { return nil }
                if algorithm == sha256 { digest = bytes }
            }
            guard let eventSize = r.u32(), let event = r.bytes(Int(eventSize)) else { return nil }
            guard index < 24, values[UInt8(index)] != nil else { continue }
            if type == noAction {
                // PCR 0 starts at the locality the first measurement came from (TPM2_Startup's).
                let signature = Bytes("StartupLocality".utf8) + [0]
                if index == 0, event.count == 17, Array(event.prefix(16)) == signature { values[0] = Bytes(repeating: 0, count: 31) + [event[16]] }
                continue
            }
            guard let digest else { return nil }
            values[UInt8(index)] = Crypto.sha256(values[UInt8(index)]! + digest)
        }
        return values
    }

    package static func read(_ path: String) -> Bytes? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var log = Bytes()
        var chunk = Bytes(repeating: 0, count: 65536)
        while log.count <= limit {
            let n = Glibc.read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return log.isEmpty ? nil : log }
            log.append(contentsOf: chunk[0..<n])
        }
        return nil
    }
}

/// The log's integers are little-endian (the engine's ByteReader reads big-endian).
private struct LittleEndianReader {
    let bytes: Bytes
    var offset = 0

    init(_ bytes: Bytes) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func bytes(_ count: Int) -> Bytes? {
        guard count >= 0, count <= bytes.count - offset else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func skip(_ count: Int) -> Bool { bytes(count) != nil }

    mutating func u16() -> UInt16? { bytes(2).map { UInt16($0[0]) | UInt16($0[1]) << 8 } }

    mutating func u32() -> UInt32? { bytes(4).map { $0.reversed().reduce(0) { $0 << 8 | UInt32($1) } } }
}

/// Why the TPM refused a PCR policy, in words a person can act on: PCRs extended after boot
/// (another user of the TPM, until the next reboot) are told apart from a boot chain that
/// changed, by comparing their values now with this boot's event log; where the log cannot be
/// read (it is root's), the message says it cannot tell.
enum BootStateDiagnosis {
    enum Cause: Equatable {
        /// These PCRs hold values that this boot's log does not account for.
        case extendedAfterBoot([UInt8])
        /// The log accounts for the values: the boot chain itself changed.
        case bootChanged
        /// No log, or no values from the TPM: either.
        case unknown(String)
    }

    static func cause(_ pcrs: [UInt8], tpm: TPMConfiguration) -> Cause {
        let path = BootEventLog.path
        guard let replayed = tpm.bootLog.map({ BootEventLog.replay(pcrs, log: $0) }) ?? BootEventLog.replay(pcrs, path: path) else {
            return .unknown("no boot event log readable\(tpm.bootLog == nil ? " at \(path)" : "") tells which")
        }
        guard let current = try? TPMAccess.operations(tpm).readPCRs(pcrs), current.count == pcrs.count else {
            return .unknown("the TPM did not give the PCRs' values to compare with the boot event log")
        }
        let extended = zip(pcrs, current).filter { replayed[$0.0] != $0.1 }.map(\.0)
        return extended.isEmpty ? .bootChanged : .extendedAfterBoot(extended)
    }

    /// A keychain sealed to `pcrs` whose secret the TPM refused: what changed, and what opens it.
    static func refusal(_ pcrs: [UInt8], tpm: TPMConfiguration) -> String {
        let cause = cause(pcrs, tpm: tpm)
        let list = PCRSelection.describe(pcrs)
        let remedy: String
        switch cause {
        case .bootChanged:
            remedy = "Open it with its recovery key (`security tpm-recover`), then `security tpm-enroll --pcrs \(list)` seals it to this boot chain again"
        case .extendedAfterBoot:
            remedy = "A reboot resets the PCRs and the password opens it again; its recovery key opens it now (`security tpm-recover`)"
        case .unknown:
            remedy =
                "Its recovery key opens it now (`security tpm-recover`); if a PCR was extended, a reboot resets it and the password opens it again; if the boot chain changed, `security tpm-enroll --pcrs \(list)` after the recovery seals it to this one"
        }
        return "\(words(cause, pcrs, sealed: "this keychain")); the TPM counted no wrong password. \(remedy)"
    }

    /// One sentence, without remedy: what changed.
    static func words(_ cause: Cause, _ pcrs: [UInt8], sealed what: String) -> String {
        let list = PCRSelection.describe(pcrs)
        switch cause {
        case .extendedAfterBoot(let extended):
            return
                "PCR \(PCRSelection.describe(extended)) was extended after boot: its value is not the one this boot's event log replays to, so a program with access to the TPM (any member of group tss can) changed it since this boot, and \(what) stays refused until the next reboot"
        case .bootChanged:
            return
                "the boot chain changed: PCR \(list) no longer hold the values \(what) was sealed to, and this boot's event log accounts for the values they hold (a firmware, boot loader or Secure Boot change, or another boot chain)"
        case .unknown(let why):
            return "PCR \(list) differs from the sealed value: the boot chain changed or a PCR was extended since boot (\(why))"
        }
    }
}
