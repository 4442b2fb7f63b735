import COpenSSL
import CSDBus
import Glibc
import KeychainCore
import SecretServiceItems
import SessionBus

/// xdg-desktop-portal's Secret backend, `org.freedesktop.impl.portal.Secret`, on the service's own
/// connection (the `.portal` file names org.freedesktop.secrets as its bus name, as gnome-keyring's
/// does). A Flatpak app asks the portal for its secret; the portal asks here with the app's id
/// and a descriptor; this writes the app's secret (64 random bytes, made on first use) to it. The
/// app derives the key of its own encrypted store from it (libsecret's file backend does), so the
/// secret must stay the same for one app id across restarts, and differ between apps.
///
/// The secret is a keychain item of the login keychain (else the default keychain) owned by the
/// app, as an item the app stored itself: it answers only that app's searches. Its attributes
/// are gnome-keyring's portal's (`app_id`), so the secrets move with `import` and `export`.
package final class SecretPortal {
    package static let path = CSDBUS_PORTAL_PATH
    package static let interface = "org.freedesktop.impl.portal.Secret"
    static let secretLength = 64
    /// The attribute gnome-keyring's portal keeps an app's secret under.
    package static let appIDAttribute = "app_id"

    /// The portal's response codes.
    enum Response: UInt32 {
        case success = 0
        case cancelled = 1
        case failed = 2
    }

    private unowned let service: SecretService

    package init(service: SecretService) {
        self.service = service
    }

    /// Adds the portal's object to the bus (before the name is taken).
    package func register() throws {
        var handlers = csdbus_portal_handlers(
            method: { message, userdata, error in SecretPortal.from(userdata).handle(message!, error!) },
            get: { _, _, property, reply, _, error in
                guard String(cString: property!) == "version" else {
                    return sd_bus_error_set(error, "org.freedesktop.DBus.Error.UnknownProperty", "no such property")
                }
                var version: UInt32 = 1
                return sd_bus_message_append_basic(reply, CChar(UInt8(ascii: "u")), &version)
            })
        let rc = csdbus_register_portal(service.bus, &handlers, Unmanaged.passUnretained(self).toOpaque())
        guard rc >= 0 else { throw ServiceError.failed("cannot register the portal backend: \(String(cString: strerror(-rc)))") }
    }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> SecretPortal {
        Unmanaged<SecretPortal>.fromOpaque(userdata!).takeUnretainedValue()
    }

    /// A call kept until it is answered: its message and the descriptor the secret goes to.
    final class Request {
        let message: OpaquePointer
        let appID: String
        private(set) var fd: Int32

        init(message: OpaquePointer, appID: String, fd: Int32) {
            self.message = sd_bus_message_ref(message)
            self.appID = appID
            self.fd = fd
        }

        deinit {
            if fd >= 0 { close(fd) }
            sd_bus_message_unref(message)
        }

        /// Writes the secret (at once: a descriptor that cannot take 64 bytes now is refused), then
        /// closes the descriptor, so that the app's read ends.
        func write(_ secret: Bytes) -> Bool {
            defer {
                close(fd)
                fd = -1
            }
            let flags = fcntl(fd, F_GETFL)
            if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
            var rest = secret[...]
            while !rest.isEmpty {
                let n = rest.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                rest = rest.dropFirst(n)
            }
            return true
        }

        func reply(_ response: Response) {
            var reply: OpaquePointer?
            guard sd_bus_message_new_method_return(message, &reply) >= 0, let reply else { return }
            defer { sd_bus_message_unref(reply) }
            var code = response.rawValue
            let writer = MessageWriter(message: reply)
            guard sd_bus_message_append_basic(reply, CChar(UInt8(ascii: "u")), &code) >= 0,
                (try? writer.container(BusType.array, "{sv}") {}) != nil
            else { return }
            _ = sd_bus_send(nil, reply, nil)
        }
    }

    private func handle(_ message: OpaquePointer, _ busError: UnsafeMutablePointer<sd_bus_error>) -> Int32 {
        do {
            guard String(cString: sd_bus_message_get_member(message)) == "RetrieveSecret" else {
                throw ServiceError.notSupported("unknown method")
            }
            let sender = sd_bus_message_get_sender(message).map { String(cString: $0) } ?? ""
            // The portal (unconfined, the user's own) asks on an app's behalf, naming the app: a
            // sandboxed app calling here itself could name another app and take its secret.
            guard service.caller(sender) == .unconfined else {
                throw ServiceError.accessDenied("only xdg-desktop-portal may ask for an app's secret")
            }
            let reader = MessageReader(message: message)
            _ = try reader.objectPath()  // the request handle: nothing here to close early
            let appID = try reader.string()
            var passed: Int32 = -1
            let rc = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "h")), &passed)
            guard rc > 0, passed >= 0 else { throw ServiceError.invalidArgs("no file descriptor") }
            guard Caller.isAppID(appID) else { throw ServiceError.invalidArgs("not an app id: \(appID)") }
            let fd = fcntl(passed, F_DUPFD_CLOEXEC, 3)
            guard fd >= 0 else { throw ServiceError.failed("cannot keep the descriptor: \(String(cString: strerror(errno)))") }
            let request = Request(message: message, appID: appID, fd: fd)
            guard let collection = portalCollection() else {
                SecretService.log("portal: no login or default keychain to keep \(appID)'s secret in")
                request.reply(.failed)
                return 1
            }
            if collection.isLocked {
                // Answered once the keychain's password is given (or the prompt dismissed): the
                // dialog names the app.
                let id = service.nextID("p")
                let prompt = Prompt(
                    id: id, sequence: UInt64(id.dropFirst()) ?? 0, owner: sender, caller: .app(appID),
                    action: .unlock([(collection.path, collection)]))
                prompt.completion = { [weak self] dismissed in
                    guard let self else { return }
                    if dismissed {
                        request.reply(.cancelled)
                    } else {
                        self.answer(request, from: collection)
                    }
                }
                service.prompts[id] = prompt
                prompt.request()
                service.startWaitingPrompts()
                return 1
            }
            answer(request, from: collection)
            return 1
        } catch {
            return ServiceError(error).set(busError)
        }
    }

    /// Where the apps' secrets are kept: the login keychain, else the default one.
    private func portalCollection() -> Collection? {
        let login = KeychainFile.loginPath()
        return service.collections.all.first { !$0.isSession && KeychainFile.sameFile($0.file, login) } ?? service.collections.defaultCollection
    }

    private func answer(_ request: Request, from collection: Collection) {
        do {
            var secret = try secret(of: request.appID, in: collection.store())
            defer { secret.wipe() }
            request.reply(request.write(secret) ? .success : .failed)
        } catch {
            SecretService.log("portal: no secret for \(request.appID): \(ServiceError(error).message)")
            request.reply(.failed)
        }
    }

    /// The app's secret: its own item; else one brought from gnome-keyring (an item no app owns
    /// with only the app's `app_id`), which becomes the app's; else a new one.
    func secret(of appID: String, in store: KeychainStore) throws -> Bytes {
        let attributes = [Self.appIDAttribute: appID]
        if let own = try store.searchSecretItems(attributes, owner: appID).unlocked.first(where: { $0.attributes == attributes }),
            let secret = try store.secretItem(own.row, includeSecret: true, owner: appID).secret
        {
            return secret
        }
        if let brought = try store.searchSecretItems(attributes).unlocked.first(where: { $0.attributes == attributes }),
            let secret = try store.secretItem(brought.row, includeSecret: true).secret, !secret.isEmpty
        {
            _ = try store.addSecretItem(
                label: brought.label, attributes: attributes, secret: secret, contentType: brought.contentType,
                replace: false, owner: appID, created: Double(brought.created), modified: Double(brought.modified))
            try store.deleteSecretItem(brought.row)
            return secret
        }
        var secret = Bytes(repeating: 0, count: Self.secretLength)
        guard RAND_bytes(&secret, Int32(secret.count)) == 1 else { throw ServiceError.failed("no randomness") }
        do {
            _ = try store.addSecretItem(
                label: "Portal secret of \(appID)", attributes: attributes, secret: secret,
                contentType: "application/octet-stream", replace: false, owner: appID)
        } catch {
            secret.wipe()
            throw error
        }
        return secret
    }
}
