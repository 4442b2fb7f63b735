import ArgumentParser
import KeychainCore

/// Attributes both password classes share, with macOS's letters.
struct CommonAttributes: ParsableArguments {
    @Option(name: .customShort("a"), parsing: .unconditional, help: "Account name.") var account: String?
    @Option(name: .customShort("c"), parsing: .unconditional, help: "Creator (four-character code).") var creator: String?
    @Option(name: .customShort("C"), parsing: .unconditional, help: "Type (four-character code).") var type: String?
    @Option(name: .customShort("D"), parsing: .unconditional, help: "Kind (description).") var kind: String?
    @Option(name: .customShort("j"), parsing: .unconditional, help: "Comment.") var comment: String?
    @Option(name: .customShort("l"), parsing: .unconditional, help: "Label.") var label: String?

    var attributes: [String: AttributeValue] {
        var out: [String: AttributeValue] = [:]
        out[AttributeKey.account] = account.map(AttributeValue.string)
        out[AttributeKey.creator] = creator.map(AttributeValue.string)
        out[AttributeKey.type] = type.map(AttributeValue.string)
        out[AttributeKey.description] = kind.map(AttributeValue.string)
        out[AttributeKey.comment] = comment.map(AttributeValue.string)
        out[AttributeKey.label] = label.map(AttributeValue.string)
        return out
    }
}

struct GenericAttributes: ParsableArguments {
    @OptionGroup var common: CommonAttributes
    @Option(name: .customShort("s"), parsing: .unconditional, help: "Service name.") var service: String?
    @Option(name: .customShort("G"), parsing: .unconditional, help: "Generic attribute value.") var generic: String?

    var query: Query { Self.query(common.attributes, service: service, generic: generic) }

    /// The generic password these options select, for a command with options of its own (`access`).
    static func query(_ common: [String: AttributeValue], service: String?, generic: String?) -> Query {
        var attributes = common
        attributes[AttributeKey.service] = service.map(AttributeValue.string)
        attributes[AttributeKey.generic] = generic.map { .data(Array($0.utf8)) }
        return Query(itemClass: .genericPassword, attributes: attributes)
    }
}

struct InternetAttributes: ParsableArguments {
    @OptionGroup var common: CommonAttributes
    @Option(name: .customShort("s"), parsing: .unconditional, help: "Server name.") var server: String?
    @Option(name: .customShort("d"), parsing: .unconditional, help: "Security domain.") var securityDomain: String?
    @Option(name: .customShort("p"), parsing: .unconditional, help: "Path.") var path: String?
    @Option(name: .customShort("P"), parsing: .unconditional, help: "Port number.") var port: Int?
    @Option(name: .customShort("r"), parsing: .unconditional, help: "Protocol (four-character code, such as htps, http, ftp, ssh, imps, smtp).")
    var protocolCode: String?
    @Option(name: .customShort("t"), parsing: .unconditional, help: "Authentication type (four-character code, such as dflt, http, form, ntlm).")
    var authenticationType: String?

    func validate() throws {
        if let port, !(0...65535).contains(port) { throw ValidationError("port must be between 0 and 65535") }
        for code in [protocolCode, authenticationType].compactMap({ $0 }) where code.utf8.count > 4 || code.isEmpty {
            // keychain_utilities.c's parse_fourcharcode: its message, status 1. (Three characters
            // are padded with a space here, where macOS suggests adding it.)
            Terminal.error("Error: four-character types must be exactly 4 characters long.")
            throw ExitCode(1)
        }
    }

    var query: Query {
        Self.query(
            common.attributes, server: server, securityDomain: securityDomain, path: path, port: port, protocolCode: protocolCode,
            authenticationType: authenticationType)
    }

    /// The internet password these options select, for a command with options of its own (`access`).
    static func query(
        _ common: [String: AttributeValue], server: String?, securityDomain: String?, path: String?, port: Int?, protocolCode: String?,
        authenticationType: String?
    ) -> Query {
        var attributes = common
        attributes[AttributeKey.server] = server.map(AttributeValue.string)
        attributes[AttributeKey.securityDomain] = securityDomain.map(AttributeValue.string)
        attributes[AttributeKey.path] = path.map(AttributeValue.string)
        attributes[AttributeKey.port] = port.map { .int(Int64($0)) }
        attributes[AttributeKey.protocol] = protocolCode.map { .string(fourCharacters($0)) }
        attributes[AttributeKey.authenticationType] = authenticationType.map { .string(fourCharacters($0)) }
        return Query(itemClass: .internetPassword, attributes: attributes)
    }

    /// macOS codes are four characters; "ftp" and "ssh" are "ftp " and "ssh " (kSecAttrProtocolFTP).
    static func fourCharacters(_ code: String) -> String {
        code.utf8.count >= 4 ? code : code + String(repeating: " ", count: 4 - code.utf8.count)
    }
}

/// How an add command gets its password, and the flags macOS accepts there.
struct NewPasswordOptions: ParsableArguments {
    @Option(name: .customShort("w"), parsing: .unconditional, help: "The password. Put -w last to be prompted, or to read it from standard input in a pipe.")
    var password: String?
    @Flag(name: .customLong("prompt-password"), help: .hidden) var promptPassword = false
    @Option(name: .customShort("X"), parsing: .unconditional, help: "The password as hexadecimal bytes.") var hexPassword: String?
    @Flag(name: .customShort("U"), help: "Update the item if it exists.") var update = false
    @Flag(
        name: [.customShort("S"), .customLong("synchronizable")],
        help: "Synchronizable (kSecAttrSynchronizable): the item syncs to the user's other devices (`security sync`); not with a ThisDeviceOnly class.")
    var synchronizable = false
    @Flag(name: .customShort("A"), help: "Any program may read the item without being asked (the list's entry `any`).") var anyApplication = false
    @Option(
        name: .customShort("T"), parsing: .unconditionalSingleValue,
        help: "A program (its path) trusted to read the item without being asked; repeatable; -T \"\" trusts none (every program is asked).")
    var applications: [String] = []
    @Option(
        name: .customLong("accessibility"),
        help:
            "Protection class: whenUnlocked (default), afterFirstUnlock, always, or one of these with ThisDeviceOnly; Apple's codes (ak, ck, dk, aku, cku, dku) work too."
    )
    var accessibility: String?
    @Option(
        name: .customLong("require"),
        help:
            "Ask for the person before the password is read, changed or deleted: user-presence, device-passcode, biometry-any, biometry-current-set, application-password (comma-separated; 'or' makes any one enough)."
    )
    var require: String?

    func validate() throws {
        if accessibility != nil, protection == nil { throw ValidationError("unknown accessibility \(accessibility!)") }
        if let require, Self.conditions(require) == nil { throw ValidationError("unknown --require condition in \(require)") }
        if let hexPassword, Self.decodeHex(hexPassword) == nil { throw ValidationError("-X takes an even number of hexadecimal digits") }
    }

    /// --require's conditions, as kSecAttrAccessControl's flags (nil: none asked for).
    var conditions: AccessConditions? { require.flatMap(Self.conditions) }

    static func conditions(_ text: String) -> AccessConditions? {
        let names: [String: AccessConditions] = [
            "user-presence": .userPresence, "device-passcode": .devicePasscode, "biometry-any": .biometryAny,
            "biometry-current-set": .biometryCurrentSet, "application-password": .applicationPassword,
            "or": .or, "and": .and
        ]
        var conditions: AccessConditions = []
        for name in text.lowercased().split(separator: ",") {
            guard let condition = names[String(name.filter { $0 != " " })] else { return nil }
            conditions.formUnion(condition)
        }
        return conditions.isDisjoint(with: .needingAPerson) ? nil : conditions
    }

    var protection: Protection? {
        guard let accessibility else { return .whenUnlocked }
        if let p = Protection(rawValue: accessibility) { return p }
        let names: [String: Protection] = [
            "whenunlocked": .whenUnlocked, "afterfirstunlock": .afterFirstUnlock, "always": .always,
            "whenunlockedthisdeviceonly": .whenUnlockedThisDeviceOnly,
            "afterfirstunlockthisdeviceonly": .afterFirstUnlockThisDeviceOnly, "alwaysthisdeviceonly": .alwaysThisDeviceOnly
        ]
        return names[accessibility.lowercased()]
    }

    /// The list -A and -T ask for; nil when neither is given (a new item then trusts the
    /// `security` tool, an updated one keeps its list).
    func accessList() throws -> AccessList? {
        guard anyApplication || !applications.isEmpty else { return nil }
        var list = AccessList([])
        if anyApplication { list.add(.anyProgram) }
        for path in applications where !path.isEmpty { list.add(.executable(try AccessEntries.program(path, option: "SecTrustedApplicationCreateFromPath"))) }
        return list
    }

    func secret() throws -> Bytes {
        if let password { return Array(password.utf8) }
        if let hexPassword, let bytes = Self.decodeHex(hexPassword) { return bytes }
        if promptPassword { return try Terminal.readSecret(prompt: "password data for new item: ", confirm: "retype password for new item: ") }
        return []
    }

    static func decodeHex(_ text: String) -> Bytes? {
        let digits = Array(text.hasPrefix("0x") ? text.utf8.dropFirst(2) : text.utf8[...])
        guard digits.count % 2 == 0 else { return nil }
        var out = Bytes()
        var i = 0
        while i < digits.count {
            guard let byte = UInt8(String(decoding: digits[i..<(i + 2)], as: UTF8.self), radix: 16) else { return nil }
            out.append(byte)
            i += 2
        }
        return out
    }
}

/// What a find command prints.
struct FindOutputOptions: ParsableArguments {
    @Flag(name: .customShort("g"), help: "Show the password too (on standard error, as macOS does).") var showPassword = false
    @Flag(name: .customShort("w"), help: "Print only the password.") var passwordOnly = false
    @Flag(name: .customLong("access"), help: "Show the item's access list too (as dump-keychain -a).") var showAccess = false
}

/// What find-key and set-key-partition-list match keys by, with macOS's letters.
struct KeyAttributes: ParsableArguments {
    @Option(name: .customShort("a"), parsing: .unconditional, help: "Match the application label.") var applicationLabel: String?
    @Option(name: .customShort("c"), parsing: .unconditional, help: "Match the creator.") var creator: String?
    @Option(name: .customShort("D"), parsing: .unconditional, help: "Match the description.") var kind: String?
    @Option(name: .customShort("j"), parsing: .unconditional, help: "Match the comment.") var comment: String?
    @Option(name: .customShort("l"), parsing: .unconditional, help: "Match the label.") var label: String?
    @Option(name: .customShort("t"), parsing: .unconditional, help: "Key type: symmetric, public or private.") var type: String?
    @Flag(name: .customShort("d"), help: "Match keys that can decrypt.") var decrypt = false
    @Flag(name: .customShort("e"), help: "Match keys that can encrypt.") var encrypt = false
    @Flag(name: .customShort("r"), help: "Match keys that can derive.") var derive = false
    @Flag(name: .customShort("s"), help: "Match keys that can sign.") var sign = false
    @Flag(name: .customShort("u"), help: "Match keys that can unwrap.") var unwrap = false
    @Flag(name: .customShort("v"), help: "Match keys that can verify.") var verify = false
    @Flag(name: .customShort("w"), help: "Match keys that can wrap.") var wrap = false

    func validate() throws {
        if let type, !["symmetric", "public", "private"].contains(type) { throw ValidationError("-t takes symmetric, public or private") }
    }

    var query: Query {
        var attributes: [String: AttributeValue] = [:]
        attributes[AttributeKey.applicationLabel] = applicationLabel.map { .data(Array($0.utf8)) }
        attributes[AttributeKey.creator] = creator.map(AttributeValue.string)
        attributes[AttributeKey.description] = kind.map(AttributeValue.string)
        attributes[AttributeKey.comment] = comment.map(AttributeValue.string)
        attributes[AttributeKey.label] = label.map(AttributeValue.string)
        let classes: [String: KeyClass] = ["public": .public, "private": .private, "symmetric": .symmetric]
        attributes[AttributeKey.keyClass] = type.flatMap { classes[$0] }.map { .int($0.rawValue) }
        for (flag, name) in [
            (decrypt, AttributeKey.canDecrypt), (encrypt, AttributeKey.canEncrypt), (derive, AttributeKey.canDerive), (sign, AttributeKey.canSign),
            (unwrap, AttributeKey.canUnwrap), (verify, AttributeKey.canVerify), (wrap, AttributeKey.canWrap)
        ] where flag {
            attributes[name] = .bool(true)
        }
        return Query(itemClass: .key, attributes: attributes)
    }
}
