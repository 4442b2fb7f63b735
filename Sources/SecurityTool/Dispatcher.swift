import ArgumentParser
import Glibc
import KeychainCore

/// security.c's main and execute_command: global options, the command found by prefix, its
/// command line read as macOS's getopt reads it, then handed to the command in canonical form.
struct Dispatcher {
    let argv: [Bytes]
    var verbose = false
    var quiet = false

    init(argv: [Bytes]) { self.argv = argv }

    mutating func run() -> Int32 {
        // swift-argument-parser's own entry points: `security --help`, completion scripts.
        if let first = argv.first.map(Self.text), first.hasPrefix("--"), first != "--" {
            return Self.runParser(argv.map(Self.text), spec: nil)
        }
        var interactive = false
        var help = false
        var prompt = "security> "
        let global: GetOpt
        do {
            global = try GetOpt(argv, spec: "hilp:qvR")
        } catch {
            Self.printUsage()
            return 2
        }
        for option in global.options {
            switch option.name {
            case "h": help = true
            case "i": interactive = true
            case "p": interactive = true; prompt = Self.text(option.value ?? [])
            case "q": quiet = true
            case "v": verbose = true
            default: break  // -l (run leaks) and -R (recovery mode) mean nothing here
            }
        }
        if global.missingValue != nil {
            Terminal.error("security: option requires an argument -- p")
            Self.printUsage()
            return 2
        }
        let rest = global.operands
        if help { return Self.help(rest.map(Self.text), command: "security") }
        if !rest.isEmpty { return execute(rest, argvOffset: global.operandIndex) }
        if interactive { return readCommands(prompt: prompt) }
        Self.printUsage()
        return 2
    }

    /// -i: commands read line by line from standard input, split as security.c's split_line does.
    mutating func readCommands(prompt: String) -> Int32 {
        let showPrompt = isatty(0) != 0
        var result: Int32 = 0
        while true {
            if showPrompt { fputs(prompt, stderr) }
            guard var line = Terminal.readCommandLine() else { break }
            defer { line.wipe() }
            let words = Self.split(line)
            guard let name = words.first else { continue }
            fflush(stdout)
            result = execute(words, argvOffset: nil)
            fflush(stdout)
            if result != 0 && !quiet { Terminal.error("\(Self.text(name)): returned \(result)") }
        }
        return result
    }

    /// One command: `words[0]` names it. `argvOffset` is where the words start in the process's
    /// argv, so secrets can be wiped there; nil for words read in interactive mode.
    func execute(_ words: [Bytes], argvOffset: Int?) -> Int32 {
        let name = Self.text(words[0])
        guard String(validating: words[0], as: UTF8.self) != nil, let spec = CommandTable.match(name) else {
            Terminal.error("security: unknown command \"\(name)\"")
            return 1
        }
        if spec.name == "help" { return Self.help(words.dropFirst().map(Self.text), command: "help") }
        guard spec.type != nil else {
            Terminal.error("security: \(spec.name): not available on Linux (it needs macOS's \(Self.macOSPart(spec.name)))")
            return 1
        }
        var arguments = Array(words.dropFirst())
        var leading: [Bytes] = []
        if spec.operandFirst, let first = arguments.first, first.first != UInt8(ascii: "-") {
            leading = [first]
            arguments.removeFirst()
        }
        let parsed: GetOpt
        do {
            parsed = try GetOpt(arguments, spec: spec.optstring, longOptions: spec.longOptions, optionalValues: Set(spec.optionalValues.keys))
        } catch GetOpt.Problem.unknown(let letter) {
            Terminal.error("security: illegal option -- \(letter)")
            return usage(spec)
        } catch {
            return usage(spec)
        }
        if let missing = parsed.missingValue, !spec.promptWhenLast.contains(missing) {
            Terminal.error("security: option requires an argument -- \(missing)")
            return usage(spec)
        }
        if verbose { echo(spec, parsed, leading: leading) }
        let argumentBase = argvOffset.map { $0 + 1 + leading.count }
        // The secrets now live in this process's own copies; argv is wiped so that other users
        // reading /proc/PID/cmdline from now on see no secret (they may have seen it before).
        var warned = false
        for option in parsed.options where spec.secretOptions.contains(option.name) && option.value != nil {
            if let index = option.valueIndex, let base = argumentBase {
                CommandLine.wipe(argument: base + index, from: option.valueOffset)
            }
            if !warned && !quiet && argvOffset != nil {
                Terminal.error(
                    "security: warning: a password given with -\(option.name) is visible to other local users while the command starts (/proc/PID/cmdline); leave it out to be prompted, or pipe it on standard input"
                )
                warned = true
            }
        }
        let translated: [String]
        do {
            translated = try translate(spec, parsed, leading: leading)
        } catch let error as KeychainError {
            return Int32(Failure.report(error).rawValue)
        } catch {
            return 1
        }
        return Self.runParser([spec.name] + translated, spec: spec)
    }

    /// The parsed command line in the form swift-argument-parser reads: each option and its value
    /// as separate words (values are parsed unconditionally, so "-w -x" keeps "-x" as the value),
    /// then "--" and the operands.
    private func translate(_ spec: CommandSpec, _ parsed: GetOpt, leading: [Bytes]) throws -> [String] {
        var out: [String] = []
        for option in parsed.options {
            var name = spec.renamed[option.name] ?? option.name
            if option.value != nil, let valued = spec.optionalValues[option.name] { name = valued }
            if name == "h" {
                out.append("--help")
                continue
            }
            if option.isLong {
                out.append("--" + name)
            } else {
                out.append("-" + name)
            }
            guard let value = option.value else { continue }
            if let text = String(validating: value, as: UTF8.self) {
                out.append(text)
            } else if name == "w", spec.promptWhenLast.contains("w") {
                // A password is bytes: one that is not UTF-8 is stored exactly, as -X would.
                out[out.count - 1] = "-X"
                out.append(value.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined())
            } else {
                throw KeychainError(
                    .param, "the value of -\(option.name) is not valid UTF-8; names are kept as UTF-8 text here, so it is refused rather than changed")
            }
        }
        // -w (or -p) last: prompt for the password; -k last: the command prompts for it anyway.
        if let missing = parsed.missingValue, missing == "w" || missing == "p" { out.append("--prompt-password") }
        let operands = leading + parsed.operands
        if !operands.isEmpty {
            out.append("--")
            for operand in operands {
                guard let text = String(validating: operand, as: UTF8.self) else {
                    throw KeychainError(.param, "a keychain or file name that is not valid UTF-8 is refused")
                }
                out.append(text)
            }
        }
        return out
    }

    /// -v: the command as security.c echoes it, with secrets hidden (CI logs are often public).
    private func echo(_ spec: CommandSpec, _ parsed: GetOpt, leading: [Bytes]) {
        var line = spec.name
        for operand in leading { line += " \"\(Self.text(operand))\"" }
        for option in parsed.options {
            line += option.isLong ? " \"--\(option.name)\"" : " \"-\(option.name)\""
            if let value = option.value {
                line += spec.secretOptions.contains(option.name) ? " \"<hidden>\"" : " \"\(Self.text(value))\""
            }
        }
        for operand in parsed.operands { line += " \"\(Self.text(operand))\"" }
        Terminal.error(line)
    }

    private func usage(_ spec: CommandSpec) -> Int32 {
        Self.printUsage(of: spec)
        return 2
    }

    static func printUsage(of spec: CommandSpec) {
        let abstract = spec.type?.configuration.abstract ?? ""
        Terminal.error("Usage: \(spec.name) \(spec.synopsis)\n        \(abstract)")
    }

    /// security.c's usage(): on standard output, status 2.
    static func printUsage() {
        Terminal.out(
            """
            Usage: security [-h] [-i] [-l] [-p prompt] [-q] [-v] [command] [opt ...]
                -i    Run in interactive mode.
                -l    Accepted (macOS runs leaks(1) before exiting).
                -p    Set the prompt to "prompt" (implies -i).
                -q    Be less verbose.
                -v    Be more verbose about what's going on.
            security commands are:
            """)
        listCommands()
    }

    static func listCommands() {
        for spec in CommandTable.commands {
            guard let type = spec.type else { continue }
            let padded = spec.name + String(repeating: " ", count: max(1, 37 - spec.name.count))
            Terminal.out("    " + padded + type.configuration.abstract)
        }
    }

    /// `security help [command...]`, `security -h [command...]`.
    static func help(_ names: [String], command: String) -> Int32 {
        guard !names.isEmpty else {
            Terminal.writeAtOnce(Security.helpMessage() + "\n")
            return 0
        }
        for name in names {
            guard let spec = CommandTable.match(name), spec.name != "help" else {
                Terminal.error("security: \(command): no such command: \(name)")
                return 1
            }
            guard let type = spec.type else {
                Terminal.error("security: \(command): \(spec.name) is not available on Linux")
                return 1
            }
            Terminal.writeAtOnce(Security.helpMessage(for: type) + "\n")
        }
        return 0
    }

    /// Runs the command; every outcome becomes an exit status, so interactive mode carries on.
    static func runParser(_ words: [String], spec: CommandSpec?) -> Int32 {
        do {
            var command = try Security.parseAsRoot(words)
            try command.run()
            return 0
        } catch let code as ExitCode {
            return code.rawValue
        } catch let error as KeychainError {
            return Int32(Failure.report(error).rawValue)
        } catch {
            let code = Security.exitCode(for: error)
            let message = Security.fullMessage(for: error)
            if code == .success {
                // Help and completion scripts go out in one write, so that a reader that stops
                // early (`| grep -q`) does not kill the tool with SIGPIPE halfway through.
                if !message.isEmpty { Terminal.writeAtOnce(message + "\n") }
                return 0
            }
            if code == .validationFailure {
                // The parser's own usage lines name the root command; macOS's usage follows instead.
                let first = message.split(separator: "\n").first.map(String.init) ?? ""
                if !first.isEmpty { Terminal.error(first.hasPrefix("Error: ") ? "security: " + first.dropFirst(7) : first) }
                if let spec { printUsage(of: spec) }
                return 2
            }
            if !message.isEmpty { Terminal.error(message) }
            return code.rawValue
        }
    }

    /// security.c's split_line: words split on white space, quoted with ' or ", \ escaping.
    static func split(_ line: Bytes) -> [Bytes] {
        var words: [Bytes] = []
        var current: Bytes?
        var quote: UInt8?
        var escaped = false
        for byte in line {
            if escaped {
                current = (current ?? []) + [byte]
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
                if current == nil { current = [] }
            } else if let q = quote {
                if byte == q {
                    words.append(current ?? [])
                    current = nil
                    quote = nil
                } else {
                    current!.append(byte)
                }
            } else if byte == UInt8(ascii: " ") || byte == 9 || byte == 10 || byte == 13 {
                if let word = current { words.append(word) }
                current = nil
            } else if current == nil && (byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'")) {
                quote = byte
                current = []
            } else {
                current = (current ?? []) + [byte]
            }
        }
        if let word = current { words.append(word) }
        return words
    }

    static func text(_ bytes: Bytes) -> String { String(decoding: bytes, as: UTF8.self) }

    private static func macOSPart(_ name: String) -> String {
        switch name {
        case "cms": return "CMS and provisioning-profile support"
        case "authorizationdb", "authorize", "execute-with-privileges": return "Authorization Services"
        case "verify-cert", "add-trusted-cert", "remove-trusted-cert", "dump-trust-settings", "user-trust-settings-enable",
            "trust-settings-export", "trust-settings-import":
            return "trust settings and policy evaluation"
        case "list-smartcards", "export-smartcard", "smartcards": return "CryptoTokenKit"
        default: return "system services"
        }
    }
}
