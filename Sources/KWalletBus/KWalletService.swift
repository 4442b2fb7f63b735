import CSDBus
import Glibc
import KWalletItems
import KeychainCore
import SecretServiceBus
import SessionBus

/// KWallet's own D-Bus API, `org.kde.KWallet` as kwalletd 5.103 serves it, on the Secret
/// Service's connection and loop: KDE's programs (Plasma's network manager, KMail, python-keyring's
/// KWallet backend, kwallet-query) never speak the Secret Service. A wallet is a keychain
/// (`kdewallet` the login keychain), its folders and entries KWalletItems' items, so the Secret
/// Service shows the same secrets.
///
/// A handle names an open wallet (one per wallet, as in kwalletd) and is honoured only for the
/// connection and application id that opened it: another program cannot use a handle it saw or
/// guessed. A sandboxed app reaches only its own folders and entries, as in the Secret Service.
package final class KWalletService: CompanionAPI {
    static let interface = "org.kde.KWallet"
    /// Plasma 5's and Plasma 6's names, each with its object.
    static let names = [("org.kde.kwalletd5", "/modules/kwalletd5"), ("org.kde.kwalletd6", "/modules/kwalletd6")]

    package var busNames: [String] { Self.names.map(\.0) }

    unowned let service: SecretService
    /// Open wallets by handle.
    var wallets: [Int32: OpenWallet] = [:]
    /// Who may use which handle: a connection, under an application id.
    var sessions: [KWalletSession] = []
    var lastTransaction: Int32 = 0

    package init(service: SecretService) {
        self.service = service
    }

    /// Adds the objects to the bus (before the names are taken). Each is a plain object handler,
    /// not a vtable: KWallet's interface overloads `close`, `isOpen` and `writeEntry`, which an
    /// sd-bus vtable cannot hold, so calls are told apart here by member and signature.
    package func register() throws {
        assert(Set(KWalletIntrospection.keys) == Set(Self.methods.keys), "Introspect and the dispatch name other methods")
        let me = Unmanaged.passUnretained(self).toOpaque()
        for (_, path) in Self.names {
            let rc = sd_bus_add_object(
                service.bus, nil, path,
                { message, userdata, error in
                    Unmanaged<KWalletService>.fromOpaque(userdata!).takeUnretainedValue().handle(message!, error!)
                }, me)
            guard rc >= 0 else { throw ServiceError.failed("cannot register \(path): \(String(cString: strerror(-rc)))") }
        }
    }

    private func handle(_ message: OpaquePointer, _ busError: UnsafeMutablePointer<sd_bus_error>) -> Int32 {
        guard sd_bus_message_is_method_call(message, nil, nil) > 0, let memberPointer = sd_bus_message_get_member(message) else { return 0 }
        let member = String(cString: memberPointer)
        let interface = sd_bus_message_get_interface(message).map { String(cString: $0) }
        let signature = sd_bus_message_get_signature(message, 1).map { String(cString: $0) } ?? ""
        let sender = sd_bus_message_get_sender(message).map { String(cString: $0) } ?? ""
        let call = Call(
            message: message, path: String(cString: sd_bus_message_get_path(message)), sender: sender, caller: service.caller(sender))
        _ = sd_bus_message_sensitive(message)
        do {
            switch interface {
            case "org.freedesktop.DBus.Introspectable":
                guard member == "Introspect" else { throw KWalletCallError.unknownMethod(member) }
                try service.reply(call) { try $0.string(KWalletIntrospection.xml) }
            case "org.freedesktop.DBus.Properties":
                // kwalletd has no properties.
                guard member == "GetAll" else { throw KWalletCallError.unknownProperty }
                try service.reply(call) { try $0.container(BusType.array, "{sv}") {} }
            case nil, Self.interface?:
                guard let method = Self.methods[member + "(" + signature + ")"] else {
                    throw KWalletCallError.unknownMethod("\(member)(\(signature))")
                }
                if call.caller == .unidentified { throw ServiceError.accessDenied("this sandboxed client could not be identified") }
                try method(self, call)
            default:
                throw KWalletCallError.unknownInterface(interface ?? "")
            }
            return 1
        } catch let error as KWalletCallError {
            return error.set(busError)
        } catch {
            return ServiceError(error).set(busError)
        }
    }

    // MARK: Signals

    /// Sent from both objects: a client of either name hears it.
    func emit(_ member: String, _ body: (MessageWriter) throws -> Void) {
        for (_, path) in Self.names { service.emit(path, Self.interface, member, body) }
    }

    /// A signal naming a folder, or telling that a wallet's folder list changed: never broadcast,
    /// but sent to each connection holding the wallet whose view that folder is in, the writer's
    /// kind (a sandboxed app's own connections, or the unconfined programs'). So no sandboxed app
    /// hears another program's folder names, nor an unconfined one an app's. kwalletd's clients
    /// (KWallet::Wallet) listen only while they hold the wallet, and match the object's path and
    /// interface, which a signal sent to them meets as a broadcast one does.
    func emit(_ member: String, seenBy owner: String?, in open: OpenWallet, _ body: (MessageWriter) throws -> Void) {
        let holders = Set(
            sessions.filter { session in
                guard session.handle == open.handle else { return false }
                let caller = service.caller(session.connection)
                return caller != .unidentified && caller.owner == owner
            }.map(\.connection))
        for connection in holders.sorted() {
            for (_, path) in Self.names { service.emit(path, Self.interface, member, to: connection, body) }
        }
    }
}

/// The errors sd-bus itself would answer for a call no vtable knows.
enum KWalletCallError: Error {
    case unknownMethod(String)
    case unknownInterface(String)
    case unknownProperty

    func set(_ error: UnsafeMutablePointer<sd_bus_error>) -> Int32 {
        switch self {
        case .unknownMethod(let m): return sd_bus_error_set(error, "org.freedesktop.DBus.Error.UnknownMethod", "Unknown method \(m)")
        case .unknownInterface(let i): return sd_bus_error_set(error, "org.freedesktop.DBus.Error.UnknownInterface", "Unknown interface \(i)")
        case .unknownProperty: return sd_bus_error_set(error, "org.freedesktop.DBus.Error.UnknownProperty", "kwalletd has no properties")
        }
    }
}

/// A wallet some connection opened: its name (as the client gave it) and its keychain.
final class OpenWallet {
    let name: String
    let handle: Int32
    let collection: Collection

    init(name: String, handle: Int32, collection: Collection) {
        self.name = name
        self.handle = handle
        self.collection = collection
    }
}

/// One connection's right to a handle, under the application id it opened the wallet with.
struct KWalletSession: Equatable {
    let connection: String
    let appid: String
    let handle: Int32
}
