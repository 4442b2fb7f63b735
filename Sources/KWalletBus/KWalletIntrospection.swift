/// What Introspect answers on KWallet's objects: kwalletd 5.103's interface, generated from this
/// table. dbus-python learns each method's signature from it (`open`'s window id is an int64,
/// `x`), so it must match what the dispatch takes (KWalletMethods.swift; a debug build checks
/// each entry at start-up).
enum KWalletIntrospection {
    typealias Arguments = [(name: String, type: String)]

    static let signals: [(name: String, arguments: Arguments)] = [
        ("walletListDirty", []),
        ("walletCreated", [("wallet", "s")]),
        ("walletOpened", [("wallet", "s")]),
        ("walletAsyncOpened", [("tId", "i"), ("handle", "i")]),
        ("walletDeleted", [("wallet", "s")]),
        ("walletClosed", [("wallet", "s")]),
        ("walletClosed", [("handle", "i")]),
        ("walletClosedId", [("handle", "i")]),
        ("allWalletsClosed", []),
        ("folderListUpdated", [("wallet", "s")]),
        ("folderUpdated", [("", "s"), ("", "s")]),
        ("applicationDisconnected", [("wallet", "s"), ("application", "s")])
    ]

    /// Each method: its arguments, its answer's type (nil: none), whether it is sent without one.
    static let methods: [(name: String, arguments: Arguments, answer: String?, noReply: Bool)] = [
        ("isEnabled", [], "b", false),
        ("open", [("wallet", "s"), ("wId", "x"), ("appid", "s")], "i", false),
        ("openPath", [("path", "s"), ("wId", "x"), ("appid", "s")], "i", false),
        ("openAsync", [("wallet", "s"), ("wId", "x"), ("appid", "s"), ("handleSession", "b")], "i", false),
        ("openPathAsync", [("path", "s"), ("wId", "x"), ("appid", "s"), ("handleSession", "b")], "i", false),
        ("close", [("wallet", "s"), ("force", "b")], "i", false),
        ("close", [("handle", "i"), ("force", "b"), ("appid", "s")], "i", false),
        ("sync", [("handle", "i"), ("appid", "s")], nil, true),
        ("deleteWallet", [("wallet", "s")], "i", false),
        ("isOpen", [("wallet", "s")], "b", false),
        ("isOpen", [("handle", "i")], "b", false),
        ("users", [("wallet", "s")], "as", false),
        ("changePassword", [("wallet", "s"), ("wId", "x"), ("appid", "s")], nil, false),
        ("wallets", [], "as", false),
        ("folderList", [("handle", "i"), ("appid", "s")], "as", false),
        ("hasFolder", [("handle", "i"), ("folder", "s"), ("appid", "s")], "b", false),
        ("createFolder", [("handle", "i"), ("folder", "s"), ("appid", "s")], "b", false),
        ("removeFolder", [("handle", "i"), ("folder", "s"), ("appid", "s")], "b", false),
        ("entryList", [("handle", "i"), ("folder", "s"), ("appid", "s")], "as", false),
        ("readEntry", [("handle", "i"), ("folder", "s"), ("key", "s"), ("appid", "s")], "ay", false),
        ("readMap", [("handle", "i"), ("folder", "s"), ("key", "s"), ("appid", "s")], "ay", false),
        ("readPassword", [("handle", "i"), ("folder", "s"), ("key", "s"), ("appid", "s")], "s", false),
        ("readEntryList", [("handle", "i"), ("folder", "s"), ("key", "s"), ("appid", "s")], "a{sv}", false),
        ("entriesList", [("handle", "i"), ("folder", "s"), ("appid", "s")], "a{sv}", false),
        ("readMapList", [("handle", "i"), ("folder", "s"), ("key", "s"), ("appid", "s")], "a{sv}", false),
        ("mapList", [("handle", "i"), ("folder", "s"), ("appid", "s")], "a{sv}", false),
        ("readPasswordList", [("handle", "i"), ("folder", "s"), ("key", "s"), ("appid", "s")], "a{sv}", false),
        ("passwordList", [("handle", "i"), ("folder", "s"), ("appid", "s")], "a{sv}", false),
        ("renameEntry", [("handle", "i"), ("folder", "s"), ("oldName", "s"), ("newName", "s"), ("appid", "s")], "i", false),
        ("writeEntry", [("handle", "i"), ("folder", "s"), ("key", "s"), ("value", "ay"), ("entryType", "i"), ("appid", "s")], "i", false),
        ("writeEntry", [("handle", "i"), ("folder", "s"), ("key", "s"), ("value", "ay"), ("appid", "s")], "i", false),
        ("writeMap", [("handle", "i"), ("folder", "s"), ("key", "s"), ("value", "ay"), ("appid", "s")], "i", false),
        ("writePassword", [("handle", "i"), ("folder", "s"), ("key", "s"), ("value", "s"), ("appid", "s")], "i", false),
        ("hasEntry", [("handle", "i"), ("folder", "s"), ("key", "s"), ("appid", "s")], "b", false),
        ("entryType", [("handle", "i"), ("folder", "s"), ("key", "s"), ("appid", "s")], "i", false),
        ("removeEntry", [("handle", "i"), ("folder", "s"), ("key", "s"), ("appid", "s")], "i", false),
        ("disconnectApplication", [("wallet", "s"), ("application", "s")], "b", false),
        ("reconfigure", [], nil, false),
        ("folderDoesNotExist", [("wallet", "s"), ("folder", "s")], "b", false),
        ("keyDoesNotExist", [("wallet", "s"), ("folder", "s"), ("key", "s")], "b", false),
        ("closeAllWallets", [], nil, false),
        ("networkWallet", [], "s", false),
        ("localWallet", [], "s", false),
        ("pamOpen", [("wallet", "s"), ("passwordHash", "ay"), ("sessionTimeout", "i")], nil, true)
    ]

    static let xml: String = {
        func argument(_ a: (name: String, type: String), _ direction: String) -> String {
            // As Qt writes it (kwalletd's own answer).
            "      <arg direction=\"\(direction)\" type=\"\(a.type)\"" + (a.name.isEmpty ? "" : " name=\"\(a.name)\"") + "/>\n"
        }
        var out = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
            "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>
              <interface name="org.freedesktop.DBus.Introspectable">
                <method name="Introspect"><arg name="xml_data" type="s" direction="out"/></method>
              </interface>
              <interface name="org.freedesktop.DBus.Peer">
                <method name="Ping"/>
                <method name="GetMachineId"><arg name="machine_uuid" type="s" direction="out"/></method>
              </interface>
              <interface name="org.kde.KWallet">

            """
        for signal in signals {
            out += "    <signal name=\"\(signal.name)\">\n" + signal.arguments.map { argument($0, "out") }.joined() + "    </signal>\n"
        }
        for method in methods {
            out += "    <method name=\"\(method.name)\">\n"
            if let answer = method.answer { out += argument(("", answer), "out") }
            if method.answer == "a{sv}" { out += "      <annotation value=\"QVariantMap\" name=\"org.qtproject.QtDBus.QtTypeName.Out0\"/>\n" }
            out += method.arguments.map { argument($0, "in") }.joined()
            if method.noReply { out += "      <annotation value=\"true\" name=\"org.freedesktop.DBus.Method.NoReply\"/>\n" }
            out += "    </method>\n"
        }
        return out + "  </interface>\n</node>\n"
    }()

    /// Each method's dispatch key, "member(signature)".
    static var keys: [String] { methods.map { $0.name + "(" + $0.arguments.map(\.type).joined() + ")" } }
}
