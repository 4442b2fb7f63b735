import KeychainCore

/// BSD getopt(3), as macOS's `security` parses every command line (security.c and each command's
/// `getopt(argc, argv, "...")`): options end at the first operand, at "-" or after "--"; "-lu" is
/// two flags; an option that takes a value takes the rest of its argument ("-pSECRET", "-t3600")
/// or else the next argument whatever it looks like ("-w -Xy7", a generated password). Arguments
/// stay bytes: argv is not text, and a name that is not UTF-8 must not be silently repaired.
///
/// Long options ("--accessibility x", "--name=value") are this tool's own additions; BSD getopt has
/// none, so they can never change how a macOS command line parses.
struct GetOpt {
    struct Option {
        /// The option letter, or the long option's name.
        var name: String
        var value: Bytes?
        /// Where the value sits in argv: the argument's index and the byte it starts at.
        var valueIndex: Int?
        var valueOffset = 0
        var isLong: Bool { name.count > 1 }
    }

    enum Problem: Error, Equatable {
        case unknown(String)
        case missingValue(String)
    }

    var options: [Option] = []
    var operands: [Bytes] = []
    /// An option that takes a value came last without one (macOS's add commands prompt then).
    var missingValue: String?
    /// The index in the parsed list at which the operands start.
    var operandIndex = 0

    /// `spec` is getopt's optstring ("a:c:wg": a colon marks an option that takes a value);
    /// `longOptions` maps a long name to whether it takes a value.
    /// `optionalValues` are long options that take the next argument as their value when it is
    /// not an option ("--git-credentials FILE"), and none otherwise ("--git-credentials --all").
    init(_ arguments: [Bytes], spec: String, longOptions: [String: Bool] = [:], optionalValues: Set<String> = []) throws {
        let takesValue = Self.letters(spec)
        var index = 0
        scanning: while index < arguments.count {
            let argument = arguments[index]
            guard argument.count >= 2, argument[0] == UInt8(ascii: "-") else { break }  // an operand, or "-"
            if argument == Array("--".utf8) {
                index += 1
                break
            }
            if argument[1] == UInt8(ascii: "-") {
                let body = Array(argument.dropFirst(2))
                let equals = body.firstIndex(of: UInt8(ascii: "="))
                let name = String(decoding: body[..<(equals ?? body.count)], as: UTF8.self)
                // Unknown long options are passed on as flags, for the command's own parser to judge.
                let wantsValue = longOptions[name] ?? false
                if let equals {
                    options.append(Option(name: name, value: Array(body[(equals + 1)...]), valueIndex: index, valueOffset: equals + 3))
                } else if optionalValues.contains(name) {
                    if index + 1 < arguments.count, let next = arguments[index + 1].first, next != UInt8(ascii: "-") {
                        options.append(Option(name: name, value: arguments[index + 1], valueIndex: index + 1))
                        index += 1
                    } else {
                        options.append(Option(name: name))
                    }
                } else if wantsValue {
                    guard index + 1 < arguments.count else {
                        missingValue = name
                        index += 1
                        break scanning
                    }
                    options.append(Option(name: name, value: arguments[index + 1], valueIndex: index + 1))
                    index += 1
                } else {
                    options.append(Option(name: name))
                }
                index += 1
                continue
            }
            var position = 1
            while position < argument.count {
                let letter = String(decoding: [argument[position]], as: UTF8.self)
                guard argument[position] < 128, let needsValue = takesValue[letter] else { throw Problem.unknown(letter) }
                position += 1
                if !needsValue {
                    options.append(Option(name: letter))
                    continue
                }
                if position < argument.count {
                    options.append(Option(name: letter, value: Array(argument[position...]), valueIndex: index, valueOffset: position))
                } else if index + 1 < arguments.count {
                    index += 1
                    options.append(Option(name: letter, value: arguments[index], valueIndex: index))
                } else {
                    missingValue = letter
                }
                break
            }
            index += 1
        }
        operandIndex = index
        operands = Array(arguments[index...])
    }

    /// "a:c:wg" as ["a": true, "c": true, "w": false, "g": false]; a leading ":" is getopt's
    /// quiet mode, which only changes who reports a missing value.
    static func letters(_ spec: String) -> [String: Bool] {
        var out: [String: Bool] = [:]
        let characters = Array(spec.drop(while: { $0 == ":" }))
        var i = 0
        while i < characters.count {
            let takes = i + 1 < characters.count && characters[i + 1] == ":"
            out[String(characters[i])] = takes
            i += takes ? 2 : 1
        }
        return out
    }
}
