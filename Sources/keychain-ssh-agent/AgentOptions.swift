/// What the command line asks for: ssh-agent's own options (OpenSSH 9.2), so that any script that
/// starts ssh-agent can start this instead, and a few long options of the keychain's.
struct AgentOptions {
    enum Shell { case bourne, csh }
    enum SocketChoice: Equatable {
        /// ssh-agent's default: a fresh /tmp/ssh-XXXXXXXXXX/agent.<pid>.
        case temporary
        /// -a PATH.
        case path(String)
        /// --user-socket: $XDG_RUNTIME_DIR/keychain/ssh-agent.socket, the one systemd's unit,
        /// environment.d and the PAM session name.
        case user
        /// --systemd: descriptor 3 from socket activation, which must be there.
        case systemd
    }

    var shell: Shell?
    var foreground = false
    var debug = false
    var kill = false
    var socket = SocketChoice.temporary
    var settings = AgentSettings()
    var command: [String] = []
    var help = false

    struct UsageError: Error {
        /// Printed before the usage text, when there is more to say than the usage.
        var message: String?
        /// ssh-agent's fatal() (exit 255, no usage) rather than its usage() (exit 1).
        var fatal = false
    }
}

/// What the agent itself is configured with (the lead maps it onto the protocol's
/// AgentConfiguration): no socket or process business here.
struct AgentSettings: Equatable {
    /// ssh-agent takes any digest OpenSSH knows (ssh_digest_alg_by_name), in any case.
    enum FingerprintHash: String, CaseIterable { case md5, sha1, sha256, sha384, sha512 }

    /// -t: seconds a key added without its own lifetime is kept; nil keeps it.
    var defaultLifetime: UInt32?
    var fingerprintHash = FingerprintHash.sha256
    /// -P: accepted and kept, although no PKCS#11 provider is ever loaded (the keychain holds the keys).
    var allowedProviders: String?
    /// -O options, as given.
    var agentOptions: [String] = []
    /// --session: keys are kept in memory only, never written into the keychain.
    var session = false
    /// --remember-confirmation: seconds an approval is remembered per program and key; 0 never.
    var rememberConfirmation: UInt32 = 0
}

extension AgentOptions {
    static let usage = """
        usage: keychain-ssh-agent [-c | -s] [-Dd] [-a bind_address] [-E fingerprint_hash]
                                  [-O option] [-P allowed_providers] [-t life]
                                  [--user-socket | --systemd] [--session] [--remember-confirmation seconds]
               keychain-ssh-agent [-a bind_address] [-E fingerprint_hash] [-O option]
                                  [-P allowed_providers] [-t life] command [arg ...]
               keychain-ssh-agent [-c | -s] -k
        """

    /// BSD getopt's rules, as ssh-agent has them: options stop at the first argument that is not
    /// one (the command and its own options), values attached (-t1h) or in the next argument.
    init(arguments: [String]) throws {
        var index = 0
        func value(_ name: String, attached: Substring) throws -> String {
            if !attached.isEmpty { return String(attached) }
            index += 1
            guard index < arguments.count else { throw UsageError(message: "option requires an argument -- \(name)") }
            return arguments[index]
        }
        scanning: while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" {
                index += 1
                break
            }
            if argument.hasPrefix("--") {
                try takeLong(argument, next: { try value(argument, attached: "") })
                index += 1
                continue
            }
            guard argument.hasPrefix("-"), argument.count > 1 else { break scanning }
            var letters = argument.dropFirst()
            while let letter = letters.first {
                letters = letters.dropFirst()
                switch letter {
                case "c", "s":
                    guard shell == nil || shell == (letter == "c" ? .csh : .bourne) else { throw UsageError() }
                    shell = letter == "c" ? .csh : .bourne
                case "k": kill = true
                case "d", "D":
                    guard !foreground else { throw UsageError() }
                    foreground = true
                    debug = letter == "d"
                case "a":
                    socket = .path(try value("a", attached: letters))
                    letters = ""
                case "t":
                    guard let lifetime = Self.seconds(try value("t", attached: letters)) else { throw UsageError(message: "Invalid lifetime") }
                    settings.defaultLifetime = lifetime
                    letters = ""
                case "E":
                    let name = try value("E", attached: letters)
                    guard let hash = AgentSettings.FingerprintHash(rawValue: name.lowercased()) else {
                        throw UsageError(message: "Invalid hash algorithm \"\(name)\"", fatal: true)
                    }
                    settings.fingerprintHash = hash
                    letters = ""
                case "P":
                    guard settings.allowedProviders == nil else { throw UsageError(message: "-P option already specified", fatal: true) }
                    settings.allowedProviders = try value("P", attached: letters)
                    letters = ""
                case "O":
                    let option = try value("O", attached: letters)
                    guard ["no-restrict-websafe", "allow-remote-pkcs11"].contains(option) || option.hasPrefix("websafe-allow=") else {
                        throw UsageError(message: "Unknown -O option", fatal: true)
                    }
                    settings.agentOptions.append(option)
                    letters = ""
                default:
                    throw UsageError(message: "unknown option -- \(letter)")
                }
            }
            index += 1
        }
        command = Array(arguments[index...])
        // ssh-agent's own rule: a command runs under a daemon, so it takes no output or foreground flag.
        if !command.isEmpty && (shell != nil || kill || foreground) { throw UsageError() }
    }

    private mutating func takeLong(_ argument: String, next: () throws -> String) throws {
        let parts = argument.dropFirst(2).split(separator: "=", maxSplits: 1)
        let name = parts.first.map(String.init) ?? ""
        func value() throws -> String { parts.count == 2 ? String(parts[1]) : try next() }
        switch name {
        case "help": help = true
        case "session": settings.session = true
        case "systemd": socket = .systemd
        case "user-socket": socket = .user
        case "remember-confirmation":
            guard let seconds = Self.seconds(try value()) else { throw UsageError(message: "Invalid time for --remember-confirmation") }
            settings.rememberConfirmation = seconds
        default: throw UsageError(message: "unknown option --\(name)")
        }
    }

    /// OpenSSH's time format (sshd_config(5) TIME FORMATS, misc.c's convtime): seconds, or a
    /// sequence of numbers each followed by s, m, h, d or w (1h30m); nil when malformed or too large.
    static func seconds(_ text: String) -> UInt32? {
        guard !text.isEmpty else { return nil }
        var total: UInt64 = 0
        var number: UInt64?
        for character in text {
            if let digit = character.wholeNumberValue, character.isASCII {
                number = (number ?? 0) * 10 + UInt64(digit)
                guard number! <= UInt64(Int32.max) else { return nil }
                continue
            }
            let multiplier: UInt64
            switch character {
            case "s", "S": multiplier = 1
            case "m", "M": multiplier = 60
            case "h", "H": multiplier = 3600
            case "d", "D": multiplier = 86400
            case "w", "W": multiplier = 604800
            default: return nil
            }
            guard let value = number else { return nil }
            total += value * multiplier
            number = nil
            guard total <= UInt64(Int32.max) else { return nil }
        }
        total += number ?? 0
        return total <= UInt64(Int32.max) ? UInt32(total) : nil
    }
}
