/// Text that others chose (an SSH key's comment, a program's path, a wallet's folder and key
/// names, a keyring's labels, another provider's names), made safe to print on a terminal line.
/// A control character there is an instruction to the terminal, not text: an escape sequence
/// could clear or rewrite the line a person reads, retitle the window, or hide what follows.
/// Each one is written as visible text instead (a byte's as \xHH, another's as \u{HHHH}), as
/// are the bidirectional overrides and the line and paragraph separators, which reorder or
/// break what is shown; a backslash is doubled, so that the escapes are not ambiguous.
package enum TerminalText {
    package static func escaped(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                out += "\\\\"
            } else if needsEscape(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += scalar.value <= 0xFF ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{" + hex + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        default: return scalar.properties.isBidiControl
        }
    }
}
