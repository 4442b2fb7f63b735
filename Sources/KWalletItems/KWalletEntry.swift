import KeychainCore

/// The kind of a KWallet entry, with KWallet's own numbers (`KWallet::Wallet::EntryType`), as
/// `entryType` answers and `writeEntry` takes them.
package enum KWalletEntryType: Int32, Sendable, CaseIterable {
    case unknown = 0
    case password = 1
    /// A binary entry ("stream" in KWallet's source).
    case stream = 2
    case map = 3
}

/// One entry of a KWallet wallet: its folder, its key, its kind and its value in KWallet's own
/// form, so that a KDE program reads back exactly the bytes it wrote. A password's value is
/// Qt's QDataStream serialization of a QString, a map's that of a QMap<QString, QString>, a
/// binary entry's the bytes as given.
package struct KWalletEntry: Sendable, Equatable {
    package var folder: String
    package var key: String
    package var type: KWalletEntryType
    package var value: Bytes

    package init(folder: String, key: String, type: KWalletEntryType, value: Bytes) {
        self.folder = folder
        self.key = key
        self.type = type
        self.value = value
    }
}
