/// Text that others chose (an SSH key's comment, a program's path, a wallet's folder and key
/// names, a keyring's labels, another provider's names), made safe to print on a terminal line.
/// A control character there is an instruction to the terminal, not text: an escape sequence
/// could clear or rewrite the line a person reads, retitle the window, or hide what follows.
/// Each one is written as visible text instead (a byte's as \xHH, another's as \u{HHHH}), as
/// are the format characters (bidirectional overrides, zero-width ones) and the line and
/// paragraph separators, which reorder, hide or break what is shown; a backslash is doubled, so
/// that the escapes are not ambiguous.
package enum TerminalText {
    package static func escaped(_ text: String) -> String { pieces(of: text).joined() }

    /// `text` as the pieces it is shown in, one a scalar: the scalar itself, or its escape. A
    /// caller that cuts a long text cuts between pieces, never inside an escape. With `quotes`,
    /// a double quote is escaped too, for text shown between quotes.
    package static func pieces(of text: String, quotes: Bool = false) -> [String] {
        text.unicodeScalars.map { scalar in
            if scalar == "\\" || (quotes && scalar == "\"") { return "\\" + String(scalar) }
            guard needsEscape(scalar) else { return String(scalar) }
            let hex = String(scalar.value, radix: 16, uppercase: true)
            return scalar.value <= 0xFF ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{" + hex + "}"
        }
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        // Format characters show nothing (the zero-width spaces and joiners, the soft hyphen,
        // U+FEFF, tag characters) or reorder what follows (the bidirectional ones): a name
        // holding one reads as another, or hides where one name ends and the next begins.
        case .control, .format, .lineSeparator, .paragraphSeparator: return true
        default: return scalar.properties.isBidiControl
        }
    }
}
