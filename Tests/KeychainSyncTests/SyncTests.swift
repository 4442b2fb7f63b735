@testable import KeychainCore
@testable import KeychainSync
@testable import SecretServiceItems
import KeychainTestSupport
import Glibc
import XCTest

/// Sync's record format and merge rule (Sources/KeychainSync): what the remote sees, what a
/// device refuses, and that every device orders versions the same way.
final class SyncRecordTests: XCTestCase {
    let group = Array(repeating: UInt8(7), count: 16)
    let key = Array(repeating: UInt8(9), count: 32)

    func record(_ secret: String = "hunter2", id: Bytes? = nil, writer: SyncDeviceKeys) -> SyncRecord {
        SyncRecord(
            id: id ?? Array(repeating: 1, count: 16), itemClass: .genericPassword,
            attributes: [
                AttributeKey.service: .string("bank.example"), AttributeKey.account: .string("alice"),
                AttributeKey.label: .string("My Bank"), AttributeKey.synchronizable: .bool(true)
            ],
            secret: Array(secret.utf8), tombstone: false, stamp: SyncStamp(mdat: 1000.5, version: 3, writer: writer.deviceID))
    }

    func testStatusShowsNoCredentialsOfTheRemote() {
        XCTAssertEqual(SyncStatus.shown(remote: "https://me:ghp_secret@git.example.org/me/k.git"), "https://***@git.example.org/me/k.git")
        XCTAssertEqual(SyncStatus.shown(remote: "https://ghp_secret@git.example.org/me/k.git"), "https://***@git.example.org/me/k.git")
        XCTAssertEqual(SyncStatus.shown(remote: "ssh://git:pw@host:22/k.git"), "ssh://git:***@host:22/k.git")
        XCTAssertEqual(SyncStatus.shown(remote: "ssh://git@host/k.git"), "ssh://git@host/k.git")
        XCTAssertEqual(SyncStatus.shown(remote: "git@host:me/k.git"), "git@host:me/k.git")
        XCTAssertEqual(SyncStatus.shown(remote: "/srv/git/k.git"), "/srv/git/k.git")
        XCTAssertEqual(SyncStatus.shown(remote: "https://host/a@b/k.git"), "https://host/a@b/k.git")
    }

    func testARecordOpensAsItWasSealedAndShowsNothingOfItsItem() throws {
        let device = try SyncDeviceKeys.generate()
        let original = record(writer: device)
        let file = try original.seal(group: group, epoch: 2, key: key, signer: device)
        let opened = try SyncRecord.open(file, id: original.id, group: group, key: key) { $0 == device.deviceID ? device.publicDevice : nil }
        XCTAssertEqual(opened, original)
        XCTAssertEqual(SyncRecord.epoch(of: file), 2)
        let text = String(decoding: file, as: UTF8.self)
        for word in ["bank", "alice", "My Bank", "hunter2"] { XCTAssertFalse(text.contains(word), word) }
        // Padded: a longer secret in the same bucket gives the same size.
        let longer = try record("hunter2-but-longer", writer: device).seal(group: group, epoch: 2, key: key, signer: device)
        XCTAssertEqual(file.count, longer.count)
        XCTAssertEqual((file.count - 8 - 12 - 16) % SyncRecord.paddingQuantum, 0)
    }

    func testATamperedRecordIsRefused() throws {
        let device = try SyncDeviceKeys.generate()
        let original = record(writer: device)
        let file = try original.seal(group: group, epoch: 1, key: key, signer: device)
        for index in [9, 30, file.count - 1] {
            var bad = file
            bad[index] ^= 1
            XCTAssertStatus(try SyncRecord.open(bad, id: original.id, group: group, key: key) { _ in device.publicDevice }, .decode)
        }
    }

    func testARecordMovedToAnotherNameOrGroupIsRefused() throws {
        let device = try SyncDeviceKeys.generate()
        let original = record(writer: device)
        let file = try original.seal(group: group, epoch: 1, key: key, signer: device)
        XCTAssertStatus(try SyncRecord.open(file, id: Array(repeating: 2, count: 16), group: group, key: key) { _ in device.publicDevice }, .decode)
        XCTAssertStatus(try SyncRecord.open(file, id: original.id, group: Array(repeating: 8, count: 16), key: key) { _ in device.publicDevice }, .decode)
    }

    func testARecordNotSignedByItsWriterIsRefused() throws {
        let device = try SyncDeviceKeys.generate()
        let other = try SyncDeviceKeys.generate()
        let file = try record(writer: device).seal(group: group, epoch: 1, key: key, signer: device)
        // A device of the group that knows the key cannot pass its version off as another's.
        XCTAssertStatus(try SyncRecord.open(file, id: record(writer: device).id, group: group, key: key) { _ in other.publicDevice }, .decode)
        XCTAssertStatus(try SyncRecord.open(file, id: record(writer: device).id, group: group, key: key) { _ in nil }, .decode)
    }

    func testTheOrderIsTheSameWhateverOrderVersionsArriveIn() {
        let a = Bytes(repeating: 1, count: 16), b = Bytes(repeating: 2, count: 16)
        let versions = [
            SyncOrder(stamp: SyncStamp(mdat: 10, version: 1, writer: a), digest: [1]),
            SyncOrder(stamp: SyncStamp(mdat: 10, version: 1, writer: b), digest: [0]),
            SyncOrder(stamp: SyncStamp(mdat: 10, version: 2, writer: a), digest: [0]),
            SyncOrder(stamp: SyncStamp(mdat: 9, version: 9, writer: b), digest: [9]),
            SyncOrder(stamp: SyncStamp(mdat: 10, version: 2, writer: a), digest: [1])
        ]
        var generator = SeededGenerator(state: 42)
        for _ in 0..<50 {
            let shuffled = versions.shuffled(using: &generator)
            XCTAssertEqual(shuffled.max(), versions[4], "later mdat, then version, then writer, then digest")
            XCTAssertEqual(shuffled.sorted(), versions.sorted())
        }
        XCTAssertLessThan(versions[3], versions[0], "an earlier modification loses whatever its version")
        XCTAssertLessThan(versions[0], versions[1], "on a tie, the greater writer id wins")
        XCTAssertLessThan(versions[2], versions[4], "then the greater digest")
    }

    func testAManifestSignedByAStrangerOrOlderDoesNotFollow() throws {
        let a = try SyncDeviceKeys.generate(), b = try SyncDeviceKeys.generate(), stranger = try SyncDeviceKeys.generate()
        var first = SyncManifest(group: group, serial: 1, epoch: 1, devices: [a.publicDevice], signer: a.deviceID)
        first.sign(with: a)
        var second = SyncManifest(group: group, serial: 2, epoch: 1, devices: [a.publicDevice, b.publicDevice], signer: a.deviceID)
        second.sign(with: a)
        XCTAssertTrue(second.follows(first))
        XCTAssertFalse(first.follows(second), "an older manifest put back")
        var forged = SyncManifest(group: group, serial: 3, epoch: 1, devices: [a.publicDevice, stranger.publicDevice], signer: stranger.deviceID)
        forged.sign(with: stranger)
        XCTAssertNoThrow(try SyncManifest.decode(forged.encoded()), "it is self-consistent")
        XCTAssertFalse(forged.follows(second), "but not signed by a device the group had")
    }

    func testTheJoinCodeCoversEveryFieldOfTheRequest() throws {
        let device = try SyncDeviceKeys.generate()
        let request = JoinRequest(group: group, device: device.publicDevice, manifestDigest: Array(repeating: 3, count: 32))
        let code = try request.code
        XCTAssertEqual(JoinRequest.normalizedCode(code).count, 10)
        XCTAssertEqual(try request.code, code, "the same on both devices")
        var other = request
        other.device.id[0] ^= 1
        XCTAssertNotEqual(try other.code, code)
        other = request
        other.manifestDigest[0] ^= 1
        XCTAssertNotEqual(try other.code, code, "a device that cloned another group state shows another code")
    }

    func testTheSealedSyncKeyOpensOnlyForItsDevice() throws {
        let a = try SyncDeviceKeys.generate(), b = try SyncDeviceKeys.generate()
        var manifest = SyncManifest(group: group, serial: 1, epoch: 1, devices: [a.publicDevice, b.publicDevice], signer: a.deviceID)
        manifest.sign(with: a)
        let sealed = try SealedSyncKey.make(group: group, epoch: 1, key: key, for: b.publicDevice, by: a)
        XCTAssertEqual(try SealedSyncKey.decode(sealed.encoded()).open(b, manifest: manifest), key)
        XCTAssertStatus(try SealedSyncKey.decode(sealed.encoded()).open(a, manifest: manifest), .decode)
    }
}

/// Items: Apple's rule that a synchronizable item is never ThisDeviceOnly.
final class SynchronizableRuleTests: StoreTestCase {
    func testSynchronizableThisDeviceOnlyIsErrSecParam() throws {
        var item = generic("a", protection: .whenUnlockedThisDeviceOnly)
        item.attributes[AttributeKey.synchronizable] = .bool(true)
        XCTAssertStatus(try store.add(item), .param)
        XCTAssertEqual(try store.count(), 0)
        var synced = generic("b")
        synced.attributes[AttributeKey.synchronizable] = .bool(true)
        try store.add(synced)
        var q = query("b")
        q.synchronizable = .yes
        XCTAssertStatus(try store.update(q, attributes: [AttributeKey.accessible: .string(Protection.afterFirstUnlockThisDeviceOnly.rawValue)]), .param)
        try store.add(generic("c", protection: .afterFirstUnlockThisDeviceOnly))
        XCTAssertStatus(try store.update(query("c"), attributes: [AttributeKey.synchronizable: .bool(true)]), .param)
    }
}

/// Two devices (two keychains) and a bare repository: the exchange refuses what the remote may
/// not make a device take.
final class SyncExchangeTests: XCTestCase {
    var scratch: Scratch!
    var remote = ""
    var home: String?

    override func setUpWithError() throws {
        guard access("/usr/bin/git", X_OK) == 0 else { throw XCTSkip("git is not installed") }
        scratch = Scratch()
        home = getenv("HOME").map { String(cString: $0) }
        // Not this machine's /etc/gitconfig (it may rewrite URLs), nor the user's.
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1)
        setenv("HOME", scratch.directory, 1)
        remote = scratch.directory + "/remote.git"
        XCTAssertEqual(sh("git init -q --bare '\(remote)'"), 0)
    }

    override func tearDown() {
        scratch?.remove()
        if let home { setenv("HOME", home, 1) } else { unsetenv("HOME") }
        unsetenv("GIT_CONFIG_NOSYSTEM")
    }

    @discardableResult
    func sh(_ command: String) -> Int32 { system(command + " >/dev/null 2>&1") >> 8 }

    func synced(_ account: String, _ secret: String) -> Item {
        var item = generic(account, service: "sync-svc", secret: secret)
        item.attributes[AttributeKey.synchronizable] = .bool(true)
        return item
    }

    func secret(_ store: KeychainStore, _ account: String) throws -> String? {
        var q = query(account, service: "sync-svc")
        q.synchronizable = .yes
        do {
            return try store.find(q, includeSecret: true).first.map { String(decoding: $0.secret ?? [], as: UTF8.self) }
        } catch let error as KeychainError where error.code == .itemNotFound {
            return nil
        }
    }

    /// A and B in one group, with A's item "a" = "one" on both.
    func pair() throws -> (SyncEngine, SyncEngine) {
        let a = SyncEngine(store: try scratch.create("a"))
        let b = SyncEngine(store: try scratch.create("b"))
        try a.store.add(synced("a", "one"))
        _ = try a.create(remote: remote)
        let code = try b.join(remote: remote)
        let confirmation = try a.approve(code: code).confirmation
        XCTAssertNotNil(try b.exchange().approvedBy, "approved, and waiting for the confirmation")
        XCTAssertNil(try secret(b.store, "a"))
        _ = try b.confirm(confirmation)
        XCTAssertEqual(try secret(b.store, "a"), "one")
        return (a, b)
    }

    /// Runs `script` in a clone of the remote and pushes what it left.
    func tamper(_ script: String) {
        let clone = scratch.directory + "/attacker"
        sh("rm -rf '\(clone)'")
        XCTAssertEqual(sh("git clone -q -b keychain '\(remote)' '\(clone)'"), 0)
        XCTAssertEqual(
            sh(
                "cd '\(clone)' && \(script) && git -c user.name=x -c user.email=x@x add -A && git -c user.name=x -c user.email=x@x commit -q -m x && git push -q origin keychain"
            ), 0)
    }

    func testAnOlderRecordPutBackIsRefusedAndReported() throws {
        let (a, b) = try pair()
        let name = PlainFiles.list(a.git.path("records")).first!
        let old = PlainFiles.read(a.git.path("records/" + name))!
        try a.store.update(query("a", service: "sync-svc").synced, attributes: [:], secret: Array("two".utf8))
        _ = try a.exchange()
        _ = try b.exchange()
        XCTAssertEqual(try secret(b.store, "a"), "two")
        try PlainFiles.write(scratch.directory + "/old", old)
        tamper("cp '\(scratch.directory)/old' records/\(name)")
        let summary = try b.exchange()
        XCTAssertEqual(summary.refused, 1)
        XCTAssertEqual(try secret(b.store, "a"), "two", "the replayed version was not applied")
        XCTAssertTrue(try b.status().log.contains { $0.contains("replayed or rolled back") })
        // B wrote the accepted version back: A sees no change of value.
        _ = try a.exchange()
        XCTAssertEqual(try secret(a.store, "a"), "two")
    }

    func testALockedKeychainSendsNoDeletions() throws {
        let (a, b) = try pair()
        var always = synced("afu", "two")
        always.attributes[AttributeKey.accessible] = .string(Protection.afterFirstUnlock.rawValue)
        try a.store.add(always)
        _ = try a.exchange()
        _ = try b.exchange()
        a.store.lock()
        // Its WhenUnlocked items cannot be seen, its AfterFirstUnlock ones can: the exchange must
        // not take the first for deleted.
        XCTAssertStatus(try a.exchange(), .interactionNotAllowed)
        _ = try b.exchange()
        XCTAssertEqual(try secret(b.store, "a"), "one")
        XCTAssertEqual(try secret(b.store, "afu"), "two")
    }

    func testARecordPlantedAtANewIdIsReportedOnce() throws {
        let (a, _) = try pair()
        tamper("head -c 600 /dev/urandom > records/0123456789abcdef0123456789abcdef")
        XCTAssertEqual(try a.exchange().refused, 1)
        XCTAssertEqual(try a.exchange().refused, 0, "reported once, not at every exchange")
        XCTAssertEqual(try a.status().log.filter { $0.contains("refused record 0123456789ab") }.count, 1)
    }

    /// Files that are no record's name (junk, a name that is not UTF-8): reported once. Noted at
    /// every exchange, they made each one write the keychain, which starts the next exchange
    /// through keychain-sync.path, for ever; and 500 of them pushed every earlier line out of the log.
    func testFilesThatAreNoRecordsNameAreReportedOnce() throws {
        let (a, _) = try pair()
        tamper("echo x > records/README && echo x > \"records/$(printf 'caf\\351')\" && mkdir records/deep && echo x > records/deep/x")
        XCTAssertEqual(try a.exchange().refused, 3)
        let state = try a.store.hiddenSecret("state")
        XCTAssertEqual(try a.exchange().refused, 0, "reported once, not at every exchange")
        XCTAssertTrue(try a.store.hiddenSecret("state") == state, "and the keychain not written again")
        XCTAssertEqual(try a.status().log.filter { $0.contains("records/README") }.count, 1)
        // More of them than the state keeps: still no keychain write at the next exchange.
        tamper("for i in $(seq 300); do echo x > records/junk$i; done")
        XCTAssertEqual(try a.exchange().refused, 300)
        let many = try a.store.hiddenSecret("state")
        let lines = try a.status().log.count
        _ = try a.exchange()
        XCTAssertTrue(try a.store.hiddenSecret("state") == many, "the keychain not written again")
        XCTAssertEqual(try a.status().log.count, lines)
        XCTAssertEqual(try secret(a.store, "a"), "one")
    }

    /// One item created on A and on B before either saw the other; C took A's first. B's is the
    /// later, so A's record becomes a tombstone: C, receiving B's record and A's tombstone in one
    /// exchange, must keep the item (with B's value), in whichever order it applies them.
    /// A Secret Service item that syncs is found on the other device by its own attributes
    /// (python-keyring's `application`, Chromium's schema), which the service looks up in the
    /// index only: the exchange indexes what it brings.
    func testASecretServiceItemIsFoundOnTheOtherDeviceByItsOwnAttributes() throws {
        let (a, b) = try pair()
        let attributes = ["application": "Python keyring library", "service": "mail", "username": "ann"]
        _ = try a.store.addSecretItem(
            label: "mail", attributes: attributes, secret: Array("from-a".utf8), contentType: "text/plain", replace: false,
            syncsNewItems: true)
        _ = try a.exchange()
        XCTAssertEqual(try b.exchange().received, 1)
        let found = try b.store.searchSecretItems(["application": "Python keyring library"]).unlocked
        XCTAssertEqual(found.map(\.attributes), [attributes])
        XCTAssertEqual(try b.store.searchSecretItems(attributes).unlocked.map(\.row), found.map(\.row))
    }

    func testAnItemCreatedOnTwoDevicesSurvivesOnAThird() throws {
        let (a, b) = try pair()
        let c = SyncEngine(store: try scratch.create("c"))
        let confirmation = try a.approve(code: try c.join(remote: remote)).confirmation
        _ = try c.confirm(confirmation)
        let names = (1...8).map { "dup\($0)" }
        for name in names { try a.store.add(synced(name, "from-a")) }
        _ = try a.exchange()
        _ = try c.exchange()
        for name in names { XCTAssertEqual(try secret(c.store, name), "from-a") }
        usleep(20_000)
        for name in names { try b.store.add(synced(name, "from-b")) }
        let atB = try b.exchange()
        XCTAssertEqual(atB.conflicts, names.count, "each loss logged")
        _ = try c.exchange()
        _ = try a.exchange()
        for name in names {
            XCTAssertEqual(try secret(c.store, name), "from-b", name)
            XCTAssertEqual(try secret(a.store, name), "from-b", name)
            XCTAssertEqual(try secret(b.store, name), "from-b", name)
        }
        // And nothing more happens on the next round.
        XCTAssertEqual(try c.exchange().received, 0)
        for name in names { XCTAssertEqual(try secret(c.store, name), "from-b", name) }
    }

    func testDeletingTheKeychainRemovesItsSyncClone() throws {
        let a = SyncEngine(store: try scratch.create("a"))
        _ = try a.create(remote: remote)
        XCTAssertEqual(access(a.folder, F_OK), 0)
        try KeychainFile.remove(a.store.path)
        XCTAssertNotEqual(access(a.folder, F_OK), 0)
        XCTAssertNotEqual(access(a.store.path + ".sync.lock", F_OK), 0)
    }

    func testOfflineIsAnErrorThatTheNextExchangeCatchesUp() throws {
        let (a, b) = try pair()
        try a.store.update(query("a", service: "sync-svc").synced, attributes: [:], secret: Array("offline".utf8))
        XCTAssertEqual(rename(remote, remote + ".away"), 0)
        XCTAssertStatus(try a.exchange(), .io)
        XCTAssertEqual(rename(remote + ".away", remote), 0)
        XCTAssertEqual(try a.exchange().sent, 1)
        _ = try b.exchange()
        XCTAssertEqual(try secret(b.store, "a"), "offline")
    }

    func testADeletedRecordIsWrittenBack() throws {
        let (a, b) = try pair()
        tamper("git rm -q records/*")
        XCTAssertEqual(try b.exchange().refused, 1, "reported missing")
        XCTAssertEqual(PlainFiles.list(b.git.path("records")).count, 1, "and written back")
        _ = try a.exchange()
        XCTAssertEqual(try secret(a.store, "a"), "one", "nobody took it for deleted")
        XCTAssertEqual(try secret(b.store, "a"), "one")
    }

    func testTheWholeRemoteRolledBackIsRefusedAndRepaired() throws {
        let (a, b) = try pair()
        let old = scratch.directory + "/old-tip"
        XCTAssertEqual(sh("git --git-dir='\(remote)' rev-parse keychain | tee '\(old)'"), 0)
        try a.store.update(query("a", service: "sync-svc").synced, attributes: [:], secret: Array("two".utf8))
        try a.store.add(synced("later", "three"))
        _ = try a.exchange()
        _ = try b.exchange()
        XCTAssertEqual(try secret(b.store, "later"), "three")
        // The remote goes back to the tip from before: an older manifest, an older record, and
        // one record missing.
        XCTAssertEqual(sh("git --git-dir='\(remote)' update-ref refs/heads/keychain $(cat '\(old)')"), 0)
        let summary = try b.exchange()
        XCTAssertGreaterThanOrEqual(summary.refused, 2)
        XCTAssertEqual(try secret(b.store, "a"), "two")
        XCTAssertEqual(try secret(b.store, "later"), "three")
        _ = try a.exchange()
        XCTAssertEqual(try secret(a.store, "a"), "two")
        XCTAssertEqual(try secret(a.store, "later"), "three")
        XCTAssertEqual(try a.status().devices.count, 2)
    }

    func testATamperedRecordIsRefusedAndReported() throws {
        let (_, b) = try pair()
        // One byte changed to another: writing a fixed one was no change where it already stood
        // there (1 run in 256: the byte is ciphertext), and the tamper had nothing to commit.
        tamper(
            "f=records/$(ls records | head -1) && b=$(dd if=$f bs=1 skip=40 count=1 2>/dev/null) && c=X && if [ \"$b\" = X ]; then c=Y; fi && printf $c | dd of=$f bs=1 seek=40 conv=notrunc 2>/dev/null"
        )
        let summary = try b.exchange()
        XCTAssertEqual(summary.refused, 1)
        XCTAssertEqual(try secret(b.store, "a"), "one")
        XCTAssertTrue(try b.status().log.contains { $0.contains("refused record") })
    }

    func testARemovedDeviceReadsNothingWrittenAfter() throws {
        let (a, b) = try pair()
        _ = try a.removeDevice(String(try b.status().thisDevice.prefix(12)))
        try a.store.add(synced("later", "after-removal"))
        _ = try a.exchange()
        XCTAssertStatus(try b.exchange(), .authFailed)
        XCTAssertNil(try secret(b.store, "later"))
        // Nor can its old key open anything now at the remote.
        let bState = try b.loadState()
        for name in PlainFiles.list(a.git.path("records")) {
            let file = PlainFiles.read(a.git.path("records/" + name))!
            XCTAssertNil(bState.keys[SyncRecord.epoch(of: file)!], "every record is sealed under the new epoch")
        }
    }

    func testARemovedDeviceCannotWriteUnderTheOldKey() throws {
        let (a, b) = try pair()
        let bKeys = try b.loadKeys()
        let oldKey = try b.loadState().keys[1]!
        let group = try a.loadState().group
        _ = try a.removeDevice(String(bKeys.deviceID.hex.prefix(12)))
        let name = PlainFiles.list(a.git.path("records")).first!
        let forged = SyncRecord(
            id: Bytes(hex: name)!, itemClass: .genericPassword,
            attributes: [AttributeKey.account: .string("a"), AttributeKey.service: .string("sync-svc"), AttributeKey.synchronizable: .bool(true)],
            secret: Array("forged".utf8), tombstone: false, stamp: SyncStamp(mdat: 4e9, version: 99, writer: bKeys.deviceID))
        try PlainFiles.write(scratch.directory + "/forged", forged.seal(group: group, epoch: 1, key: oldKey, signer: bKeys))
        tamper("cp '\(scratch.directory)/forged' records/\(name)")
        let summary = try a.exchange()
        XCTAssertEqual(summary.refused, 1)
        XCTAssertEqual(try secret(a.store, "a"), "one")
    }

    func testAnItemThisKeychainWouldRefuseIsRefusedBeforeAnythingIsReplaced() throws {
        let (a, b) = try pair()
        let bKeys = try b.loadKeys()
        let state = try b.loadState()
        let name = PlainFiles.list(a.git.path("records")).first!
        // A device of the group sends the item back as ThisDeviceOnly, which never syncs.
        let bad = SyncRecord(
            id: Bytes(hex: name)!, itemClass: .genericPassword,
            attributes: [
                AttributeKey.account: .string("a"), AttributeKey.service: .string("sync-svc"), AttributeKey.synchronizable: .bool(true),
                AttributeKey.accessible: .string(Protection.whenUnlockedThisDeviceOnly.rawValue)
            ],
            secret: Array("bad".utf8), tombstone: false, stamp: SyncStamp(mdat: 4e9, version: 99, writer: bKeys.deviceID))
        try PlainFiles.write(
            scratch.directory + "/bad", bad.seal(group: state.group, epoch: state.manifest.epoch, key: state.keys[state.manifest.epoch]!, signer: bKeys))
        tamper("cp '\(scratch.directory)/bad' records/\(name)")
        XCTAssertEqual(try a.exchange().refused, 1)
        XCTAssertEqual(try secret(a.store, "a"), "one", "the item it would have replaced is still there")
    }

    func testAWrongConfirmationTakesNothing() throws {
        let a = SyncEngine(store: try scratch.create("a"))
        let b = SyncEngine(store: try scratch.create("b"))
        try a.store.add(synced("a", "one"))
        _ = try a.create(remote: remote)
        let confirmation = try a.approve(code: try b.join(remote: remote)).confirmation
        let digits = SyncCode.normalized(confirmation)
        let wrong = String(digits.dropLast()) + (digits.last == "0" ? "1" : "0")
        XCTAssertStatus(try b.confirm(wrong), .authFailed)
        XCTAssertTrue(try b.status().pending)
        XCTAssertNil(try secret(b.store, "a"), "nothing taken from a group the person did not confirm")
        XCTAssertNil(try b.loadState().keys[1], "nor its key kept")
        _ = try b.confirm(confirmation)
        XCTAssertEqual(try secret(b.store, "a"), "one")
    }

    func testADeviceStillWaitingCannotApproveOrRemove() throws {
        let a = SyncEngine(store: try scratch.create("a"))
        let b = SyncEngine(store: try scratch.create("b"))
        _ = try a.create(remote: remote)
        let code = try b.join(remote: remote)
        // An error, not a crash, on a device whose own approval is not through.
        XCTAssertThrowsError(try b.approve(code: code))
        XCTAssertThrowsError(try b.removeDevice(String(try a.status().thisDevice.prefix(12))))
        let confirmation = try a.approve(code: code).confirmation
        XCTAssertThrowsError(try b.approve(code: code))
        _ = try b.confirm(confirmation)
        XCTAssertEqual(try b.status().devices.count, 2)
    }

    func testTwoRequestsShowingOneCodeAreRefused() throws {
        let a = SyncEngine(store: try scratch.create("a"))
        let b = SyncEngine(store: try scratch.create("b"))
        _ = try a.create(remote: remote)
        let code = try b.join(remote: remote)
        // The remote puts a second request showing the same code beside the first.
        tamper("cp requests/* requests/00000000000000000000000000000000")
        XCTAssertStatus(try a.approve(code: code), .param)
        XCTAssertEqual(try a.status().devices.count, 1, "nobody was approved")
    }

    func testALinkInTheRemoteTreeIsNotFollowed() throws {
        let (a, _) = try pair()
        let outside = scratch.directory + "/outside"
        mkdir(outside, 0o700)
        tamper("git rm -q -r records && ln -s '\(outside)' records")
        _ = try a.exchange()
        XCTAssertEqual(PlainFiles.list(outside), [], "nothing written through the link")
        XCTAssertEqual(try secret(a.store, "a"), "one")
        XCTAssertEqual(PlainFiles.list(a.git.path("records")).count, 1, "the record written back in a real folder")
    }

    func testTheCallersGitRepositoryIsNeverTheClone() throws {
        let (a, _) = try pair()
        // `security sync now` run from a git hook or `git rebase -x` inherits GIT_INDEX_FILE (and
        // the like) naming the caller's repository: the clone must not write there.
        let outerIndex = scratch.directory + "/outer-index"
        setenv("GIT_INDEX_FILE", outerIndex, 1)
        defer { unsetenv("GIT_INDEX_FILE") }
        try a.store.add(synced("b", "two"))
        _ = try a.exchange()
        XCTAssertNotEqual(access(outerIndex, F_OK), 0, "the caller's index untouched")
        unsetenv("GIT_INDEX_FILE")
        // A clone that lost its .git folder, inside a repository of the user's (a home kept in
        // git) whose origin is the same remote: git must not fall back on the enclosing one.
        XCTAssertEqual(
            sh(
                "cd '\(scratch.directory)' && git init -q -b main && git remote add origin '\(remote)' && touch mine && git add mine && git -c user.name=x -c user.email=x@x commit -q -m mine"
            ), 0)
        PlainFiles.removeTree(a.git.path(".git"))
        XCTAssertThrowsError(try a.exchange())
        XCTAssertEqual(
            sh("cd '\(scratch.directory)' && test \"$(git symbolic-ref HEAD)\" = refs/heads/main && test -f mine"), 0, "the user's repository untouched")
    }

    func testANameFromTheRemoteCannotWriteLinesOrEscapesIntoTheLog() throws {
        let (a, _) = try pair()
        // A file name with a line break and a terminal escape: `sync status` prints the log.
        tamper("echo x > \"records/x$(printf '\\033]0;pwned\\007\\nZ joined the group: confirmed')\"")
        XCTAssertEqual(try a.exchange().refused, 1)
        let log = try a.status().log
        XCTAssertFalse(log.contains { $0.hasPrefix("Z joined") || $0.contains("\n") || $0.contains("\u{1B}") || $0.contains("\u{07}") }, "\(log)")
        XCTAssertTrue(log.contains { $0.contains("ignored records/x") })
    }

    func testAnUnverifiableManifestIsReportedOnce() throws {
        let (a, _) = try pair()
        // A manifest the remote signed itself, with a later serial: refused, and nothing exchanged
        // while it stands; but noted once, or every refusal would write the keychain (and
        // keychain-sync.path start the next exchange) and push the rest out of the log.
        let attacker = try SyncDeviceKeys.generate()
        var forged = SyncManifest(group: try a.loadState().group, serial: 99, epoch: 1, devices: [attacker.publicDevice], signer: attacker.deviceID)
        forged.sign(with: attacker)
        try PlainFiles.write(scratch.directory + "/forged", forged.encoded())
        tamper("cp '\(scratch.directory)/forged' group")
        XCTAssertStatus(try a.exchange(), .decode)
        let state = try a.store.hiddenSecret("state")
        XCTAssertStatus(try a.exchange(), .decode)
        XCTAssertTrue(try a.store.hiddenSecret("state") == state, "the keychain not written again")
        XCTAssertEqual(try a.status().log.filter { $0.contains("refused the remote's group manifest 99") }.count, 1)
        XCTAssertEqual(try a.status().devices.count, 2)
    }

    func testAGroupRolledBackOverSeveralChangesHealsOnceTheRemoteIsLeftAlone() throws {
        let (a, b) = try pair()
        let d = SyncEngine(store: try scratch.create("d"))
        let old = scratch.directory + "/old-tip"
        XCTAssertEqual(sh("git --git-dir='\(remote)' rev-parse keychain | tee '\(old)'"), 0)
        // Two changes of the group B has not seen: D approved, then removed.
        _ = try d.confirm(try a.approve(code: try d.join(remote: remote)).confirmation)
        _ = try a.removeDevice(String(try d.status().thisDevice.prefix(12)))
        // The remote puts back the tip from before both; A writes its manifest back.
        XCTAssertEqual(sh("git --git-dir='\(remote)' update-ref refs/heads/keychain $(cat '\(old)')"), 0)
        _ = try a.exchange()
        // Left alone from then on, the remote must let B follow the chain to A's manifest.
        _ = try b.exchange()
        XCTAssertEqual(try b.status().epoch, 2)
        XCTAssertEqual(try b.status().devices.count, 2)
    }

    func testAGitignoreFromTheRemoteHidesNothingFromTheExchange() throws {
        let (a, b) = try pair()
        // Ignored files are not added: A would say it sent the item, push nothing, and note it
        // missing at every exchange after.
        tamper("printf '*\\n' > .gitignore && git add -f .gitignore")
        try a.store.add(synced("b", "two"))
        XCTAssertEqual(try a.exchange().sent, 1)
        _ = try b.exchange()
        XCTAssertEqual(try secret(b.store, "b"), "two")
        let state = try a.store.hiddenSecret("state")
        _ = try a.exchange()
        XCTAssertTrue(try a.store.hiddenSecret("state") == state, "nothing missing, nothing written again")
    }

    func testNoHookRunsInTheClone() throws {
        let (a, _) = try pair()
        // --no-verify leaves post-checkout, post-commit and reference-transaction: neither the
        // clone's hooks nor a hooks path in the user's configuration run.
        let marker = scratch.directory + "/hook-ran"
        let hooks = scratch.directory + "/hooks"
        mkdir(hooks, 0o700)
        for name in ["post-checkout", "post-commit", "reference-transaction", "prepare-commit-msg"] {
            try PlainFiles.write(hooks + "/" + name, Array("#!/bin/sh\necho \"$0 in $(pwd)\" >> '\(marker)'\n".utf8))
            chmod(hooks + "/" + name, 0o700)
            try PlainFiles.write(a.git.path(".git/hooks/" + name), Array("#!/bin/sh\necho \"$0 in $(pwd)\" >> '\(marker)'\n".utf8))
            chmod(a.git.path(".git/hooks/" + name), 0o700)
        }
        XCTAssertEqual(sh("git config --global core.hooksPath '\(hooks)'"), 0)
        try a.store.add(synced("b", "two"))
        _ = try a.exchange()
        // (The bare remote, being local here, runs the user's hooks path on its side: its business.)
        let ran = String(decoding: PlainFiles.read(marker) ?? [], as: UTF8.self).split(separator: "\n").filter { $0.contains(".sync") }
        XCTAssertEqual(ran, [], "a hook ran in the clone")
    }

    func testAFolderPlantedWhereTheManifestGoesDoesNotStopTheGroup() throws {
        let (a, b) = try pair()
        tamper("git rm -q group && mkdir group && echo x > group/x")
        _ = try a.exchange()
        try a.store.add(synced("b", "two"))
        _ = try a.exchange()
        _ = try b.exchange()
        XCTAssertEqual(try secret(b.store, "b"), "two")
    }

    func testAGroupRolledBackToBeforeARemovalHealsOnceTheRemoteIsLeftAlone() throws {
        let (a, b) = try pair()
        let d = SyncEngine(store: try scratch.create("d"))
        _ = try d.confirm(try a.approve(code: try d.join(remote: remote)).confirmation)
        _ = try b.exchange()
        let old = scratch.directory + "/old-tip"
        XCTAssertEqual(sh("git --git-dir='\(remote)' rev-parse keychain | tee '\(old)'"), 0)
        _ = try a.removeDevice(String(try d.status().thisDevice.prefix(12)))
        // The remote (with the removed device) puts back the tip from before the removal, before
        // B saw it; then A's next exchange writes its manifest back.
        XCTAssertEqual(sh("git --git-dir='\(remote)' update-ref refs/heads/keychain $(cat '\(old)')"), 0)
        _ = try b.exchange()
        _ = try a.exchange()
        // From then on the remote is left alone: B must come to the new epoch.
        _ = try b.exchange()
        XCTAssertEqual(try b.status().epoch, 2)
        try a.store.add(synced("later", "after-removal"))
        _ = try a.exchange()
        _ = try b.exchange()
        XCTAssertEqual(try secret(b.store, "later"), "after-removal")
    }
}

extension Query {
    var synced: Query {
        var q = self
        q.synchronizable = .yes
        return q
    }
}
