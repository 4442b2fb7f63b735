@testable import KeychainCore
@testable import KeychainTPMClient
@testable import KeychainTPM
import Glibc
import XCTest

/// A signing TPM for the wire's tests: keys are blobs naming this TPM's primary, signatures echo
/// the digest, so an answer shows what reached the TPM.
extension SimulatedTPM: TPMSigningOperations {
    func createSigningKey() throws -> (point: Bytes, blob: Bytes) {
        ([0x04] + Bytes(repeating: 0x11, count: 64), primary + [0x6b])
    }

    func sign(digest: Bytes, blob: Bytes) throws -> (r: Bytes, s: Bytes) {
        guard blob == primary + [0x6b] else { throw TPMFailure.foreign("this key belongs to another TPM") }
        return (digest, Bytes(repeating: 0x22, count: 32))
    }
}

/// The SSH agent's TPM keys (TPMSigningKeys): the helper's side of the wire, the client's reading
/// of answers (from a stand-in helper that answers set bytes), the key template. Tests/tpm drives
/// the real helper and swtpm.
final class TPMSigningKeyTests: XCTestCase {
    let digest = Bytes(repeating: 0x5d, count: 32)

    func served(_ operation: String, by tpm: TPMOperations, _ fields: (inout ByteWriter) -> Void) throws -> ByteReader {
        var request = TPMHelperWire.request(operation, TPMConfiguration(tcti: "simulated"))
        fields(&request)
        request.u32(5)
        // serve sets the helper's alarm to the request's limit; this process is not the helper.
        defer { alarm(0) }
        return try TPMHelperWire.readReply(try TPMHelperService.serve(request.bytes) { _ in tpm })
    }

    func testTheHelperMakesAndUsesKeysAndRefusesMalformedRequestsBeforeTheTPM() throws {
        let tpm = SimulatedTPM()
        var created = try served(TPMSigningWire.create, by: tpm) { _ in }
        let point = try created.blob()
        let blob = try created.blob()
        XCTAssertTrue(created.isAtEnd)
        XCTAssertEqual(point.count, 65)
        var signed = try served(TPMSigningWire.sign, by: tpm) {
            $0.blob(blob); $0.blob(digest)
        }
        XCTAssertEqual(try signed.blob(), digest)
        XCTAssertEqual(try signed.blob().count, 32)
        XCTAssertTrue(signed.isAtEnd)
        XCTAssertThrowsError(
            try served(TPMSigningWire.sign, by: SimulatedTPM(primary: 2)) {
                $0.blob(blob); $0.blob(digest)
            }
        ) {
            XCTAssertEqual($0 as? TPMFailure, .foreign("this key belongs to another TPM"))
        }
        let malformed: [(inout ByteWriter) -> Void] = [
            {
                $0.blob(blob); $0.blob(Array(self.digest.dropLast()))
            },
            {
                $0.blob(blob); $0.blob(self.digest + [0])
            },
            {
                $0.blob([]); $0.blob(self.digest)
            },
            { $0.blob(blob) },
            {
                $0.blob(blob); $0.blob(self.digest); $0.u8(0)
            }
        ]
        for (n, fields) in malformed.enumerated() {
            XCTAssertThrowsError(try served(TPMSigningWire.sign, by: tpm, fields), "request \(n)") { error in
                // A record cut short is the engine's decoding error, which main answers as a
                // malformed request; the others are refused by the wire's own checks.
                XCTAssertTrue(error is TPMFailure || error is KeychainError, "request \(n): \(error)")
                XCTAssertNotEqual(error as? TPMFailure, .foreign("this key belongs to another TPM"), "request \(n) reached the TPM")
            }
        }
    }

    /// A stand-in for keychain-tpm-helper that answers `answer` whatever it is asked.
    func helper(answering answer: Bytes) throws -> TPMConfiguration {
        let folder = "/tmp/keychain-signing-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertEqual(mkdir(folder, 0o700), 0)
        let answerFile = folder + "/answer"
        addTeardownBlock {
            unlink(answerFile)
            unlink(folder + "/helper")
            rmdir(folder)
        }
        let script = "#!/bin/sh\ncat >/dev/null\ncat \(answerFile)\n"
        for (path, contents, mode) in [(answerFile, answer, 0o600), (folder + "/helper", Bytes(script.utf8), 0o700)] {
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode_t(mode))
            XCTAssertEqual(contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, contents.count)
            close(fd)
        }
        var configuration = TPMConfiguration(tcti: "swtpm:host=127.0.0.1,port=9")
        configuration.helper = folder + "/helper"
        return configuration
    }

    func answer(_ fields: (inout ByteWriter) -> Void) -> Bytes {
        var w = ByteWriter()
        w.u8(0)
        w.string("")
        fields(&w)
        return w.bytes
    }

    func testTheClientNamesEachReasonAndRefusesMalformedAnswers() throws {
        let point = [0x04] + Bytes(repeating: 7, count: 64)
        let key = try TPMSigningKeys.create(
            try helper(
                answering: answer {
                    $0.blob(point); $0.blob([1, 2, 3])
                }))
        XCTAssertEqual(key, TPMSigningKey(publicPoint: point, blob: [1, 2, 3]))
        let r = Bytes(repeating: 1, count: 32)
        let s = Bytes(repeating: 2, count: 32)
        let signature = try TPMSigningKeys.sign(
            digest: digest, with: [1],
            try helper(
                answering: answer {
                    $0.blob(r); $0.blob(s)
                }))
        XCTAssertEqual(signature.r, r)
        XCTAssertEqual(signature.s, s)

        let unexpected = TPMSigningKeyError.failed("keychain-tpm-helper answered something unexpected")
        for bad in [
            answer {
                $0.blob(Array(point.dropLast())); $0.blob([1])
            },
            answer {
                $0.blob([0x02] + point.dropFirst()); $0.blob([1])
            },
            answer {
                $0.blob(point); $0.blob([])
            },
            answer {
                $0.blob(point); $0.blob([1]); $0.u8(0)
            }
        ] {
            XCTAssertThrowsError(try TPMSigningKeys.create(try helper(answering: bad))) { XCTAssertEqual($0 as? TPMSigningKeyError, unexpected) }
        }
        for bad in [
            answer {
                $0.blob(r); $0.blob(Array(s.dropLast()))
            }, answer { $0.blob(r) }, answer { _ in }
        ] {
            XCTAssertThrowsError(try TPMSigningKeys.sign(digest: digest, with: [1], try helper(answering: bad))) {
                XCTAssertTrue($0 is TPMSigningKeyError, "\($0)")
            }
        }
        XCTAssertThrowsError(
            try TPMSigningKeys.sign(digest: digest, with: [1], try helper(answering: TPMHelperWire.failure(.foreign("this key belongs to another TPM (x)"))))
        ) {
            XCTAssertEqual($0 as? TPMSigningKeyError, .otherTPM("this key belongs to another TPM (x)"))
            XCTAssertEqual("\($0)", "this key belongs to another TPM (x)")
        }
        XCTAssertThrowsError(try TPMSigningKeys.create(try helper(answering: TPMHelperWire.failure(.unavailable("tpm2-tss cannot talk to the TPM"))))) {
            XCTAssertEqual("\($0)", "no TPM: tpm2-tss cannot talk to the TPM")
        }
        XCTAssertThrowsError(try TPMSigningKeys.create(TPMConfiguration(tcti: nil, absence: "no TPM (/dev/tpmrm0 does not exist)"))) {
            XCTAssertEqual($0 as? TPMSigningKeyError, .noTPM("no TPM (/dev/tpmrm0 does not exist)"))
            XCTAssertEqual("\($0)", "no TPM (/dev/tpmrm0 does not exist)")
        }
        XCTAssertThrowsError(
            try TPMSigningKeys.sign(
                digest: [1, 2], with: [1],
                try helper(
                    answering: answer {
                        $0.blob(r); $0.blob(s)
                    }))
        ) {
            XCTAssertEqual("\($0)", "a SHA-256 digest is 32 bytes, not 2")
        }
    }

    func testTheTemplateIsAnUnrestrictedECDSAP256SigningKeyAndNothingElsePasses() {
        let template = TPMTemplates.signingKey()
        XCTAssertTrue(TPMTemplates.isSigningKey(template))
        XCTAssertEqual(template.publicArea.objectAttributes & (TPMConstant.attrDecrypt | TPMConstant.attrRestricted), 0)
        XCTAssertFalse(TPMTemplates.isSigningKey(TPMTemplates.storagePrimary()))
        XCTAssertFalse(TPMTemplates.isSigningKey(TPMTemplates.sealedData()))
        // CTSS2's types are not named here (this target does not import it): the edit's type is
        // the template's.
        func edited<Area>(_ area: Area, _ edit: (inout Area) -> Void) -> Area {
            var copy = area
            edit(&copy)
            return copy
        }
        XCTAssertFalse(TPMTemplates.isSigningKey(edited(template) { $0.publicArea.objectAttributes |= TPMConstant.attrDecrypt }))
        XCTAssertFalse(TPMTemplates.isSigningKey(edited(template) { $0.publicArea.objectAttributes |= TPMConstant.attrRestricted }))
        XCTAssertFalse(TPMTemplates.isSigningKey(edited(template) { $0.publicArea.objectAttributes &= ~TPMConstant.attrNoDA }))
        XCTAssertFalse(TPMTemplates.isSigningKey(edited(template) { $0.publicArea.parameters.eccDetail.scheme.scheme = TPMConstant.algNull }))
        XCTAssertFalse(TPMTemplates.isSigningKey(edited(template) { $0.publicArea.parameters.eccDetail.scheme.details.ecdsa.hashAlg = 0x000C }))
        XCTAssertFalse(TPMTemplates.isSigningKey(edited(template) { $0.publicArea.parameters.eccDetail.curveID = 0x0004 }))
        XCTAssertFalse(TPMTemplates.isSigningKey(edited(template) { $0.publicArea.authPolicy.size = 32 }))
    }
}
