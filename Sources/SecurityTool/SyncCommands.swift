import ArgumentParser
import KeychainCore
import KeychainSync

/// `security sync ACTION`: the front end of the engine's sync (Sources/KeychainSync); it
/// parses and prints, nothing more.
struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync synchronizable items with the user's other devices through a git remote.",
        discussion: """
            Actions: init REMOTE (start a group on an empty remote), join REMOTE (ask to join; prints a \
            code), approve [CODE] (on a device of the group: without CODE, list the requests and their \
            codes; with it, approve the device showing that code; prints a confirmation), confirm CODE (on \
            the new device: the confirmation, then the first exchange), now (exchange with the remote), status, \
            remove-device ID (remove a lost device; rotates the sync key), leave (forget the group here), \
            default [on|off] (whether new items from the git and docker helpers and the Secret Service's \
            unconfined clients are synchronizable on this machine; off unless set). \
            REMOTE is anything git can push to: a URL, user@host:path, or a folder holding a bare repository.
            """)

    @Option(name: .customShort("k"), help: "Keychain (default: the default keychain).") var keychain: String?
    @Argument(help: "init, join, approve, confirm, now, status, remove-device, leave, default.") var action: String
    @Argument(help: "The remote (init, join), the code (approve, confirm), the device id or its start (remove-device), on or off (default).") var operand:
        String?

    func validate() throws {
        let needs: [String: Bool] = [
            "init": true, "join": true, "approve": false, "now": false, "status": false, "remove-device": true, "leave": false, "default": false,
            "confirm": true
        ]
        guard let wanted = needs[action] else { throw ValidationError("unknown sync action \(action)") }
        if wanted && operand == nil { throw ValidationError("sync \(action) needs an argument") }
        if !wanted && operand != nil && action != "approve" && action != "default" { throw ValidationError("sync \(action) takes no argument") }
        if action == "default", let operand, operand != "on", operand != "off" { throw ValidationError("sync default takes on or off") }
    }

    func run() throws {
        try perform("sync \(action)") {
            let store = try KeychainStore.open(at: keychain.map(KeychainFile.resolve), storage: .kernel)
            let engine = SyncEngine(store: store)
            switch action {
            case "init":
                let summary = try engine.create(remote: operand!)
                Terminal.out("sync group started on \(operand!); this device: \(try engine.status().thisDevice.prefix(16))")
                show(summary)
            case "join":
                let code = try engine.join(remote: operand!)
                Terminal.out("code: \(code)")
                Terminal.out(
                    "on a device of the group, run `security sync approve \(code)` once it shows the same code; then `security sync confirm` here with the confirmation it shows"
                )
            case "approve":
                guard let code = operand else {
                    let pending = try engine.pendingRequests()
                    if pending.isEmpty { Terminal.out("no device is asking to join") }
                    for request in pending { Terminal.out("code \(request.code)  device \(request.device.hex.prefix(16))") }
                    return
                }
                let (device, confirmation, summary) = try engine.approve(code: code)
                Terminal.out("approved device \(device.hex.prefix(16))")
                Terminal.out("confirmation: \(confirmation)")
                Terminal.out("on the new device, run `security sync confirm \(confirmation)`")
                show(summary)
            case "now":
                show(try engine.exchange())
            case "confirm":
                show(try engine.confirm(operand!))
            case "status":
                let status = try engine.status()
                Terminal.out("remote: \(status.remote)")
                Terminal.out("this device: \(status.thisDevice)")
                Terminal.out("state: \(status.pending ? "waiting for approval" : "member") (key epoch \(status.epoch))")
                for device in status.devices { Terminal.out("device: \(device)\(device == status.thisDevice ? " (this device)" : "")") }
                Terminal.out("records: \(status.liveRecords) items, \(status.records - status.liveRecords) deletions")
                Terminal.out("last exchange: \(status.lastExchange) (\(status.lastResult))")
                Terminal.out("new items from the helpers and the Secret Service: \(store.syncsNewItems ? "synchronizable" : "this machine only")")
                for line in status.log { Terminal.out("log: \(line)") }
            case "remove-device":
                let (device, summary) = try engine.removeDevice(operand!)
                Terminal.out("removed device \(device.hex.prefix(16)); the sync key was rotated")
                show(summary)
            case "default":
                if let operand { try store.setSyncsNewItems(operand == "on") }
                Terminal.out("new items from the helpers and the Secret Service: \(store.syncsNewItems ? "synchronizable" : "this machine only")")
            case "leave":
                try engine.leave()
                Terminal.out("this keychain left its sync group (its items stay here)")
            default:
                throw ValidationError("unknown sync action \(action)")
            }
        }
    }

    private func show(_ summary: ExchangeSummary) {
        if let approver = summary.approvedBy {
            Terminal.out(
                "approved by device \(approver.hex.prefix(16)): run `security sync confirm CODE` with the confirmation that `security sync approve` showed there"
            )
            return
        }
        if summary.pending {
            Terminal.out("waiting for a device of the group to approve this one (`security sync approve` there)")
            return
        }
        Terminal.out(
            "sent \(summary.sent), received \(summary.received), refused \(summary.refused), conflicts \(summary.conflicts)"
                + (summary.skipped.isEmpty ? "" : ", skipped \(summary.skipped.count)")
                + (summary.refused + summary.conflicts > 0 ? " (see `security sync status`)" : ""))
        // A timer's exchange has nobody to ask: the exchange goes on without these, and says so.
        for item in summary.skipped {
            Terminal.error(
                "security: sync: \(item) not sent: reading it needs a person to answer (its access list does not name this program, or it needs the user's presence); it is tried again at the next exchange"
            )
        }
    }
}
