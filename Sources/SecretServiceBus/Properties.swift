import CSDBus
import Glibc
import KeychainCore
import SecretServiceItems
import SessionBus

/// org.freedesktop.DBus.Properties: sd-bus calls these for Get, GetAll and Set, and for the values
/// PropertiesChanged carries.
extension SecretService {
    func get(
        _ path: String, _ interface: String, _ property: String, _ reply: OpaquePointer,
        _ busError: UnsafeMutablePointer<sd_bus_error>
    ) -> Int32 {
        let w = MessageWriter(message: reply)
        let caller = currentCaller
        do {
            if caller == .unidentified { throw ServiceError.accessDenied("this sandboxed client could not be identified") }
            switch (interface, property) {
            case (Interface.service, "Collections"):
                try w.objectPaths(collections.all.map(\.path))
            case (Interface.collection, _):
                let collection = try collection(at: path)
                switch property {
                case "Items": try w.objectPaths(try collection.store().secretItemRows(owner: caller.owner).map(collection.itemPath))
                case "Label": try w.string(try collection.store().collectionLabel() ?? collection.name)
                case "Locked": try w.bool(collection.isLocked)
                case "Created", "Modified":
                    // Writes land in the -wal file first; the main file's time moves at checkpoints.
                    var seconds = 0
                    for suffix in property == "Created" ? [""] : ["", "-wal"] {
                        var info = stat()
                        guard stat(collection.file + suffix, &info) == 0 else { continue }
                        seconds = max(seconds, property == "Created" ? info.st_ctim.tv_sec : info.st_mtim.tv_sec)
                    }
                    try w.uint64(UInt64(seconds))
                default: throw ServiceError.invalidArgs("no property \(property)")
                }
            case (Interface.item, _):
                let (collection, row) = try item(at: path)
                // A locked item's label and attributes are encrypted under the locked key: it shows
                // as Locked with an empty label and no attributes, as clients expect to be able
                // to list locked items before unlocking them.
                let item: SecretItem?
                do {
                    item = try collection.store().secretItem(row, owner: caller.owner)
                } catch let error as KeychainError where error.code == .interactionNotAllowed {
                    item = nil
                }
                switch property {
                case "Locked": try w.bool(item == nil)
                case "Attributes": try w.stringDictionary(item?.attributes ?? [:])
                case "Label": try w.string(item?.label ?? "")
                case "Created": try w.uint64(item?.created ?? 0)
                case "Modified": try w.uint64(item?.modified ?? 0)
                default: throw ServiceError.invalidArgs("no property \(property)")
                }
            default:
                throw ServiceError.invalidArgs("no property \(property)")
            }
            return 1
        } catch {
            return ServiceError(error).set(busError)
        }
    }

    func set(
        _ path: String, _ interface: String, _ property: String, _ value: OpaquePointer,
        _ busError: UnsafeMutablePointer<sd_bus_error>
    ) -> Int32 {
        let reader = MessageReader(message: value)
        let caller = currentCaller
        do {
            if caller == .unidentified { throw ServiceError.accessDenied("this sandboxed client could not be identified") }
            switch (interface, property) {
            case (Interface.item, "Attributes"):
                let (collection, row) = try item(at: path)
                try collection.store().updateSecretItem(row, attributes: try reader.stringDictionary(), owner: caller.owner)
                itemChanged(collection, row)
            case (Interface.item, "Label"):
                let (collection, row) = try item(at: path)
                try collection.store().updateSecretItem(row, label: try reader.string(), owner: caller.owner)
                itemChanged(collection, row)
            case (Interface.collection, "Label"):
                if caller.isConfined { throw ServiceError.accessDenied("a sandboxed app cannot rename the user's keychains") }
                let collection = try collection(at: path)
                try collection.store().setCollectionLabel(try reader.string())
                emit(ObjectPaths.root, Interface.service, "CollectionChanged") { try $0.objectPath(collection.path) }
            default:
                throw ServiceError.invalidArgs("property \(property) cannot be set")
            }
            return 1
        } catch {
            return ServiceError(error).set(busError)
        }
    }
}
