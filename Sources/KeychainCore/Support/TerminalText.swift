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
        // Combining marks draw on the character before them: a name's first would mark what
        // precedes the name (its opening quote), and a long run stacks over the lines around it.
        var kept: Int?  // marks kept on the current character; nil: none of the name's own
        return text.unicodeScalars.map { scalar in
            if [.nonspacingMark, .enclosingMark].contains(scalar.properties.generalCategory) {
                guard let count = kept, count < maximumMarks else { return escape(scalar) }
                kept = count + 1
                return String(scalar)
            }
            kept = 0
            if scalar == "\\" || (quotes && scalar == "\"") { return "\\" + String(scalar) }
            guard needsEscape(scalar) else { return String(scalar) }
            kept = nil
            return escape(scalar)
        }
    }

    private static func escape(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return scalar.value <= 0xFF ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{" + hex + "}"
    }

    /// Combining marks kept on one character: enough for the scripts that stack them (a
    /// Vietnamese vowel's two, Hebrew's points and cantillation).
    static let maximumMarks = 4

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
