import Glibc
import KeychainCore
import KeychainPeers

/// The name a person knows a program by ("Firefox"), for the question: from the .desktop file
/// whose TryExec or Exec names the caller's executable, in the applications folders of the
/// broker's own XDG_DATA_DIRS (the service manager's, default /usr/local/share:/usr/share),
/// never the user's: a user's folder could give any program a trusted name.
package struct DesktopNames {
    package var folders: [String]
    /// Where a command named without a slash is looked for: a fixed list, not the user's PATH.
    package var bin = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    private var names: [String: String] = [:]
    private var seen: [String: Int] = [:]

    package init(folders: [String]? = nil) {
        let dirs = getenv("XDG_DATA_DIRS").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        self.folders = folders ?? dirs.split(separator: ":").filter { $0.hasPrefix("/") }.map { $0 + "/applications" }
    }

    /// The desktop name of `executable` (a real path), or nil. Read again whenever a folder changed.
    package mutating func name(of executable: String) -> String? {
        let stamps = Dictionary(uniqueKeysWithValues: folders.map { ($0, Self.changeTime($0)) })
        if stamps != seen {
            seen = stamps
            names = index()
        }
        return names[executable]
    }

    /// executable → Name. A program that several entries name differently (a launcher such as
    /// flatpak, sh or env running others) gets none: the name must be the program's, not one of
    /// the programs it may be running.
    func index() -> [String: String] {
        var found: [String: Set<String>] = [:]
        for folder in folders {
            for file in Self.entries(folder) where file.hasSuffix(".desktop") {
                guard let bytes = PlainFiles.read(folder + "/" + file), bytes.count < 1 << 16 else { continue }
                let entry = Self.parse(String(decoding: bytes, as: UTF8.self))
                guard let name = entry.name else { continue }
                for command in Set([entry.tryExec, entry.exec].compactMap({ $0 })) {
                    let base = command.split(separator: "/").last.map(String.init) ?? command
                    guard !Self.launchers.contains(base), let path = resolve(command) else { continue }
                    found[path, default: []].insert(name)
                }
            }
        }
        return found.compactMapValues { $0.count == 1 ? $0.first : nil }
    }

    /// Programs that run another named on their command line: never named after what they run.
    static let launchers: Set<String> = [
        "env", "sh", "bash", "dash", "zsh", "flatpak", "snap", "gtk-launch", "xdg-open", "gio", "python3", "python", "perl", "java",
        "mono", "wine", "exo-open", "kioclient5", "kstart5", "pkexec", "sudo", "gksudo", "x-terminal-emulator"
    ]

    /// The real path of a command as a .desktop file names it.
    func resolve(_ command: String) -> String? {
        let candidates = command.hasPrefix("/") ? [command] : command.contains("/") ? [] : bin.map { $0 + "/" + command }
        for candidate in candidates {
            guard let resolved = realpath(candidate, nil) else { continue }
            defer { free(resolved) }
            return String(cString: resolved)
        }
        return nil
    }

    /// The [Desktop Entry] group's Name, TryExec and the program Exec runs (its first word, past
    /// `env` and its VAR=value words); Hidden entries are deleted ones and give nothing.
    static func parse(_ text: String) -> (name: String?, exec: String?, tryExec: String?) {
        var name: String?, exec: String?, tryExec: String?, hidden = false
        var inEntry = false
        for raw in text.split(separator: "\n") {
            let line = raw.drop { $0 == " " || $0 == "\t" }
            if line.hasPrefix("[") {
                inEntry = line.hasPrefix("[Desktop Entry]")
                continue
            }
            guard inEntry, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingTrailingSpaces, value = String(line[line.index(after: equals)...].drop { $0 == " " })
            switch key {
            case "Name": name = value
            case "TryExec": tryExec = value
            case "Exec": exec = program(ofExec: value)
            case "Hidden": hidden = value == "true"
            default: break
            }
        }
        if hidden { return (nil, nil, nil) }
        return (name.map { Caller.displayable(String($0.prefix(100))) }, exec, tryExec)
    }

    /// `env A=1 "/opt/My App/app" %U` → "/opt/My App/app".
    static func program(ofExec exec: String) -> String? {
        var words: [String] = []
        var word = "", quoted = false, escaped = false
        for character in exec {
            if escaped {
                word.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            } else if character == " " && !quoted {
                if !word.isEmpty { words.append(word) }
                word = ""
            } else {
                word.append(character)
            }
        }
        if !word.isEmpty { words.append(word) }
        var rest = words[...]
        if rest.first == "env" || rest.first == "/usr/bin/env" {
            rest = rest.dropFirst()
            while let word = rest.first, word.contains("=") || word.hasPrefix("-") {
                rest = rest.dropFirst(word == "-u" || word == "--unset" || word == "-C" || word == "--chdir" ? 2 : 1)
            }
        }
        return rest.first
    }

    static func entries(_ folder: String) -> [String] {
        guard let dir = opendir(folder) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir), names.count < 10_000 {
            let name = withUnsafePointer(to: entry.pointee.d_name) { $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) } }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted()
    }

    static func changeTime(_ folder: String) -> Int {
        var st = stat()
        guard stat(folder, &st) == 0 else { return -1 }
        return st.st_mtim.tv_sec &* 1_000_000_000 &+ st.st_mtim.tv_nsec
    }
}

extension Substring {
    fileprivate var trimmingTrailingSpaces: String { String(self.reversed().drop { $0 == " " || $0 == "\t" }.reversed()) }
}

extension BrokerService {
    /// The caller as the question names it: its desktop name, when a .desktop file names its
    /// executable, before its summary (the program's path and its parents).
    func asker(_ caller: any CallerFacts) -> String {
        guard let path = caller.executablePath, let name = desktopNames.name(of: path) else { return caller.summary }
        return "\"\(name)\", that is \(caller.summary),"
    }
}
