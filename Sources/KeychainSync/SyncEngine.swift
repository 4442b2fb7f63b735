import KeychainCore
import Glibc

/// Sync of synchronizable items through a git remote (`security sync ...`). git is only the
/// transport: every exchange fetches the remote's tip, decides per record against what this
/// device accepted before, writes this device's changes as new record versions, pushes, and on a
/// push that lost a race fetches and decides again. Only after the push succeeded are the remote's
/// winners written into the keychain, together with the new state, in one transaction.
package final class SyncEngine {
    package let store: KeychainStore
    package let folder: String
    let git: SyncGit
    /// How often an exchange fetches and merges again when another device pushed first.
    static let attempts = 12

    package init(store: KeychainStore) {
        self.store = store
        folder = store.path + ".sync"
        git = SyncGit(folder: folder)
    }

    // MARK: Local keys and state

    func loadKeys() throws -> SyncDeviceKeys {
        guard var bytes = try store.hiddenSecret("device") else { throw Self.notSetUp }
        defer { bytes.wipe() }
        return try SyncDeviceKeys.decode(bytes)
    }

    func loadState() throws -> SyncState {
        guard let bytes = try store.hiddenSecret("state") else { throw Self.notSetUp }
        return try SyncState.decode(bytes)
    }

    static let stillWaiting = KeychainError(
        .notAvailable, "this device is still waiting to join the group (`security sync confirm CODE`): it cannot approve or remove devices")

    static let notSetUp = KeychainError(.notAvailable, "this keychain is in no sync group (`security sync init REMOTE` or `security sync join REMOTE`)")

    package var isSetUp: Bool { (try? store.hiddenSecret("state")) != nil }

    /// One exchange at a time per keychain: the timer, a path unit and a person may all start one.
    func exclusively<T>(_ body: () throws -> T) throws -> T {
        let fd = open(store.path + ".sync.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw KeychainError(.io, "cannot open the sync lock next to \(store.path)") }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw KeychainError(.io, "cannot lock the sync lock") }
        }
        return try body()
    }

    // MARK: Setting up

    /// `security sync init REMOTE`: a new group whose only device is this one, on a remote that
    /// holds none yet; then the first exchange sends this keychain's synchronizable items.
    package func create(remote: String) throws -> ExchangeSummary {
        try exclusively {
            guard try store.hiddenSecret("state") == nil else {
                throw KeychainError(.duplicateItem, "this keychain is already in a sync group (`security sync status`)")
            }
            let git = try SyncGit.create(folder, remote: remote)
            do {
                if try git.fetch() {
                    throw KeychainError(.duplicateItem, "the remote already holds a sync group: `security sync join \(remote)`")
                }
                let keys = try SyncDeviceKeys.generate()
                let group = try Crypto.random(16)
                var manifest = SyncManifest(group: group, serial: 1, epoch: 1, devices: [keys.publicDevice], signer: keys.deviceID)
                manifest.sign(with: keys)
                let key = try Crypto.random(Crypto.keyLength)
                try Self.writeManifest(manifest, git)
                try git.write("keys/" + keys.deviceID.hex, SealedSyncKey.make(group: group, epoch: 1, key: key, for: keys.publicDevice, by: keys).encoded())
                try git.write(".gitattributes", Array("* binary\n".utf8))
                _ = try git.commitAll()
                guard try git.push() else { throw KeychainError(.io, "another device created a group on this remote at the same time") }
                let state = SyncState(
                    remote: remote, group: group, manifest: manifest, manifestDigests: [Crypto.sha256(manifest.encoded())],
                    keys: [1: key], knownDevices: [keys.publicDevice], records: [:], log: [], lastExchange: 0, lastResult: "created", pending: false,
                    history: [manifest.encoded()])
                try store.batch {
                    try store.setHiddenSecret("device", keys.encoded())
                    try store.setHiddenSecret("state", state.encoded())
                }
            } catch {
                PlainFiles.removeTree(folder)
                throw error
            }
            return try exchangeLocked()
        }
    }

    /// `security sync join REMOTE`: clones, makes this device's keys, and asks to join; the code
    /// returned is what `security sync approve` on a device of the group must show too.
    package func join(remote: String) throws -> String {
        try exclusively {
            guard try store.hiddenSecret("state") == nil else {
                throw KeychainError(.duplicateItem, "this keychain is already in a sync group (`security sync status`)")
            }
            let git = try SyncGit.create(folder, remote: remote)
            do {
                guard try git.fetch() else { throw KeychainError(.itemNotFound, "the remote holds no sync group: `security sync init` starts one") }
                try git.resetToRemote()
                guard let bytes = git.read("group") else { throw KeychainError.decode("the remote holds no group manifest") }
                let manifest = try SyncManifest.decode(bytes)
                let keys = try SyncDeviceKeys.generate()
                var request = JoinRequest(group: manifest.group, device: keys.publicDevice, manifestDigest: Crypto.sha256(bytes))
                request.signature = keys.sign(request.signedPart)
                let name = "requests/" + (try Crypto.random(16)).hex
                var pushed = false
                for _ in 0..<Self.attempts {
                    try git.write(name, request.encoded())
                    _ = try git.commitAll()
                    if try git.push() {
                        pushed = true
                        break
                    }
                    _ = try git.fetch()
                    try git.resetToRemote()
                }
                guard pushed else { throw KeychainError(.io, "the remote kept moving; try again") }
                let state = SyncState(
                    remote: remote, group: manifest.group, manifest: manifest, manifestDigests: [Crypto.sha256(bytes)], keys: [:],
                    knownDevices: manifest.devices, records: [:], log: [], lastExchange: 0, lastResult: "waiting for approval", pending: true,
                    history: [bytes])
                try store.batch {
                    try store.setHiddenSecret("device", keys.encoded())
                    try store.setHiddenSecret("state", state.encoded())
                }
                return try request.code
            } catch {
                PlainFiles.removeTree(folder)
                throw error
            }
        }
    }

    package struct PendingDevice: Sendable {
        package var code: String
        package var device: Bytes
    }

    /// The join requests at the remote that a device of this group could approve, with their codes.
    package func pendingRequests() throws -> [PendingDevice] {
        try exclusively {
            var state = try loadState()
            let keys = try loadKeys()
            guard try git.fetch() else { throw KeychainError(.itemNotFound, "the remote holds no sync group") }
            try git.resetToRemote()
            _ = try acceptManifest(&state, keys: keys)
            let pending = requests(state)
            guard pending.count <= 16 else {
                throw KeychainError.param("\(pending.count) join requests at the remote: remove requests/ there and join again")
            }
            return try pending.map { PendingDevice(code: try $0.request.code, device: $0.request.device.id) }
        }
    }

    private func requests(_ state: SyncState) -> [(name: String, request: JoinRequest)] {
        git.list("requests").compactMap { name in
            guard let bytes = git.read("requests/" + name), let request = try? JoinRequest.decode(bytes),
                request.group == state.group, state.manifestDigests.contains(request.manifestDigest),
                state.manifest.device(request.device.id) == nil
            else { return nil }
            return ("requests/" + name, request)
        }
    }

    /// `security sync approve CODE`: adds the device whose request shows `code` to the manifest
    /// and seals the current sync key for it, in an exchange.
    package func approve(code: String) throws -> (device: Bytes, confirmation: String, summary: ExchangeSummary) {
        try exclusively {
            guard try !loadState().pending else { throw Self.stillWaiting }
            var approved: Bytes?
            var confirmation = ""
            let summary = try exchangeLocked { state, keys, git in
                let wanted = JoinRequest.normalizedCode(code)
                let pending = self.requests(state)
                // Each code costs a memory-hard hash: a remote stuffed with requests is refused.
                guard pending.count <= 16 else {
                    throw KeychainError.param("\(pending.count) join requests at the remote: remove requests/ there and join again")
                }
                let matches = try pending.filter { JoinRequest.normalizedCode(try $0.request.code) == wanted }
                guard matches.count <= 1 else {
                    throw KeychainError.param(
                        "several join requests show the code \(code): one imitates the other; remove requests/ at the remote and join again")
                }
                guard let match = matches.first else {
                    throw KeychainError(.itemNotFound, "no join request at the remote shows the code \(code)")
                }
                var manifest = state.manifest
                manifest.serial += 1
                manifest.devices.append(match.request.device)
                manifest.sign(with: keys)
                try Self.writeManifest(manifest, git)
                try git.write(
                    "keys/" + match.request.device.id.hex,
                    SealedSyncKey.make(group: state.group, epoch: manifest.epoch, key: state.keys[manifest.epoch]!, for: match.request.device, by: keys)
                        .encoded())
                git.remove(match.name)
                try self.adopt(manifest, into: &state)
                approved = match.request.device.id
                confirmation = try SyncCode.confirmation(manifest: manifest.encoded(), device: match.request.device.id)
                return false
            }
            guard let approved else { throw Self.stillWaiting }
            return (approved, confirmation, summary)
        }
    }

    /// `security sync remove-device ID`: a new manifest without the device and a new key epoch
    /// sealed for the others only; every record is sealed again under the new key in the same
    /// push, so the removed device can read nothing written from then on.
    package func removeDevice(_ prefix: String) throws -> (device: Bytes, summary: ExchangeSummary) {
        try exclusively {
            guard try !loadState().pending else { throw Self.stillWaiting }
            var removed: Bytes?
            let summary = try exchangeLocked { state, keys, git in
                let matches = state.manifest.devices.filter { $0.id.hex.hasPrefix(prefix.lowercased()) }
                guard matches.count == 1, let gone = matches.first else {
                    throw KeychainError(
                        matches.isEmpty ? .itemNotFound : .param,
                        matches.isEmpty ? "no device of the group has an id starting with \(prefix)" : "\(prefix) names several devices: give more of the id")
                }
                guard gone.id != keys.deviceID else {
                    throw KeychainError.param("a device cannot remove itself: run remove-device on another device of the group")
                }
                var manifest = state.manifest
                manifest.serial += 1
                manifest.epoch += 1
                manifest.devices.removeAll { $0.id == gone.id }
                manifest.sign(with: keys)
                let key = try Crypto.random(Crypto.keyLength)
                state.keys[manifest.epoch] = key
                try Self.writeManifest(manifest, git)
                git.remove("keys/" + gone.id.hex)
                for device in manifest.devices {
                    try git.write(
                        "keys/" + device.id.hex, SealedSyncKey.make(group: state.group, epoch: manifest.epoch, key: key, for: device, by: keys).encoded())
                }
                try self.adopt(manifest, into: &state)
                removed = gone.id
                return true
            }
            guard let removed else { throw Self.stillWaiting }
            return (removed, summary)
        }
    }

    static func writeManifest(_ manifest: SyncManifest, _ git: SyncGit) throws {
        let bytes = manifest.encoded()
        try git.write("group", bytes)
        try git.write("history/" + Self.serialName(manifest.serial), bytes)
    }

    static func serialName(_ serial: UInt64) -> String {
        let digits = String(serial)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }

    func adopt(_ manifest: SyncManifest, into state: inout SyncState) throws {
        state.manifest = manifest
        state.manifestDigests.append(Crypto.sha256(manifest.encoded()))
        if state.manifestDigests.count > 64 { state.manifestDigests.removeFirst(state.manifestDigests.count - 64) }
        state.history.append(manifest.encoded())
        if state.history.count > 64 { state.history.removeFirst(state.history.count - 64) }
        state.remember(manifest.devices)
    }

    /// Takes the remote's manifest if it follows the one this device trusts through the chain of
    /// manifests in `history/`, each signed by a device of the one before. A manifest that does
    /// not (forged, or an older one put back) is refused and reported, and this device's own is
    /// written back. Then makes sure this device holds the current epoch's key. Returns whether
    /// this device is in the group.
    func acceptManifest(_ state: inout SyncState, keys: SyncDeviceKeys) throws -> Bool {
        let bytes = git.read("group") ?? []
        if Crypto.sha256(bytes) != state.manifestDigests.last {
            var chain = state.manifest
            var followed: [SyncManifest] = []
            var ok = false
            if let tip = try? SyncManifest.decode(bytes), tip.group == state.group, tip.serial > chain.serial, tip.serial - chain.serial <= 4096 {
                ok = true
                for serial in (chain.serial + 1)...tip.serial {
                    guard let file = git.read("history/" + Self.serialName(serial)), let next = try? SyncManifest.decode(file), next.follows(chain) else {
                        ok = false
                        break
                    }
                    chain = next
                    followed.append(next)
                }
                ok = ok && chain == tip
            }
            if ok {
                // Every manifest of the chain, so that each can be put back at history/.
                for manifest in followed { try adopt(manifest, into: &state) }
            } else if let tip = try? SyncManifest.decode(bytes), tip.group == state.group, tip.serial > state.manifest.serial {
                // A later manifest this device cannot verify (its history is gone or forged):
                // writing the older one back would undo a change of the group, so stop instead.
                // Noted once: a write at every refusal would start the next exchange through
                // keychain-sync.path, for ever, and push the rest out of the log.
                let mark = Crypto.sha256(Array("group".utf8) + bytes)
                if !state.refused.contains(mark) {
                    state.refused.append(mark)
                    if state.refused.count > SyncState.maximumRefused { state.refused.removeFirst(state.refused.count - SyncState.maximumRefused) }
                    state.note(
                        "\(Self.timestamp()) refused the remote's group manifest \(tip.serial): no chain of signatures leads to it from the one accepted here"
                    )
                    try? store.setHiddenSecret("state", state.encoded())
                }
                throw KeychainError.decode("the remote's group manifest cannot be verified from this device's; nothing was exchanged")
            } else {
                state.note(
                    "\(Self.timestamp()) refused the remote's group manifest (missing, not signed by a device of the group, or older than the one accepted here); wrote this device's back"
                )
                try Self.writeManifest(state.manifest, git)
            }
        }
        guard state.manifest.device(keys.deviceID) != nil else { return false }
        if state.keys[state.manifest.epoch] == nil {
            guard let file = git.read("keys/" + keys.deviceID.hex) else {
                throw KeychainError.decode("the remote holds no sync key for this device at epoch \(state.manifest.epoch)")
            }
            state.keys[state.manifest.epoch] = try SealedSyncKey.decode(file).open(keys, manifest: state.manifest)
        }
        try restoreSealedKeys(state, keys: keys)
        try restoreHistory(state)
        return true
    }

    /// Writes back at history/ the manifests this device accepted that the remote lost or changed:
    /// an older tip put back drops the later ones, and a device that had not followed them could
    /// otherwise verify no manifest from then on.
    func restoreHistory(_ state: SyncState) throws {
        for bytes in state.history {
            guard let manifest = try? SyncManifest.decode(bytes), manifest.group == state.group else { continue }
            let name = "history/" + Self.serialName(manifest.serial)
            if git.read(name) != bytes { try git.write(name, bytes) }
        }
    }

    /// Seals the current key again for every device of the manifest whose keys/ file is missing or
    /// not one a device of the group made for it at this epoch. An older tip put back (by the
    /// remote, with a removed device) drops the current epoch's files; the manifest is written
    /// back, and without them a device that had not opened the key yet could never exchange again.
    func restoreSealedKeys(_ state: SyncState, keys: SyncDeviceKeys) throws {
        guard let key = state.keys[state.manifest.epoch] else { return }
        for device in state.manifest.devices {
            let name = "keys/" + device.id.hex
            if let file = git.read(name), let sealed = try? SealedSyncKey.decode(file), sealed.group == state.group,
                sealed.epoch == state.manifest.epoch, sealed.device == device.id, let signer = state.manifest.device(sealed.signer),
                signer.verify(sealed.signature, of: sealed.signedPart)
            {
                continue
            }
            try git.write(name, SealedSyncKey.make(group: state.group, epoch: state.manifest.epoch, key: key, for: device, by: keys).encoded())
        }
    }

    /// The first manifest after `pinned` in the accepted chain that lists `me`, and its bytes.
    func approvalManifest(after pinned: SyncManifest, me: Bytes) throws -> (SyncManifest, Bytes) {
        var serial = pinned.serial + 1
        while serial <= pinned.serial + 4096, let bytes = git.read("history/" + Self.serialName(serial)) {
            let manifest = try SyncManifest.decode(bytes)
            if manifest.device(me) != nil { return (manifest, bytes) }
            serial += 1
        }
        throw KeychainError.decode("no manifest at the remote adds this device")
    }

    static func timestamp(_ time: Double = SystemClock.now()) -> String {
        var t = time_t(time)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}

/// What `security sync status` shows; read from this device's state alone, without the network.
package struct SyncStatus: Sendable {
    package var remote: String
    package var group: String
    package var thisDevice: String
    package var devices: [String]
    package var epoch: UInt32
    package var records: Int
    package var liveRecords: Int
    package var pending: Bool
    package var lastExchange: String
    package var lastResult: String
    package var log: [String]

    /// The remote as status prints it: a URL's credentials (`https://user:token@host/...`, or a
    /// token alone as the user name, as git hosts hand them out) are left out of the screen and
    /// of whatever copies it; `ssh://git@host` and `git@host:path` keep their user, who is no secret.
    package static func shown(remote: String) -> String {
        let parts = remote.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        // scheme:, "", authority, path: a URL; anything else (a folder, git@host:path) as it is.
        guard parts.count >= 3, parts[0].hasSuffix(":"), parts[1].isEmpty, let at = parts[2].lastIndex(of: "@") else { return remote }
        let scheme = parts[0].dropLast().lowercased()
        let user = parts[2][..<at]
        let shownUser: Substring
        if scheme == "http" || scheme == "https" {
            shownUser = "***"
        } else if let colon = user.firstIndex(of: ":") {
            shownUser = user[..<colon] + ":***"
        } else {
            shownUser = user
        }
        let authority = shownUser + parts[2][at...]
        return ([parts[0], parts[1], authority] + parts.dropFirst(3)).joined(separator: "/")
    }
}

extension SyncEngine {
    package func status() throws -> SyncStatus {
        var state = try loadState()
        let keys = try loadKeys()
        if let (time, result) = readLastExchange(), time > state.lastExchange, !state.pending {
            (state.lastExchange, state.lastResult) = (time, result)
        }
        return SyncStatus(
            remote: SyncStatus.shown(remote: state.remote), group: state.group.hex, thisDevice: keys.deviceID.hex,
            devices: state.manifest.devices.map { $0.id.hex }, epoch: state.manifest.epoch, records: state.records.count,
            liveRecords: state.records.values.filter { !$0.tombstone }.count, pending: state.pending,
            lastExchange: state.lastExchange == 0 ? "never" : Self.timestamp(state.lastExchange), lastResult: state.lastResult, log: state.log)
    }

    /// `security sync leave`: forgets the group on this device (its keys, state and clone); the
    /// items stay in the keychain, and the group should remove the device too.
    package func leave() throws {
        try exclusively {
            // A clone left by an init or join that failed half-way goes too.
            guard try store.hiddenSecret("state") != nil || access(folder, F_OK) == 0 else { throw Self.notSetUp }
            try store.batch {
                try store.removeHiddenSecret("state")
                try store.removeHiddenSecret("device")
            }
            PlainFiles.removeTree(folder)
        }
    }
}
