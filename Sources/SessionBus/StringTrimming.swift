/// The small cuts of text the service's files and names need: a configuration line's spaces, a
/// file name's suffix.
extension Substring {
    package var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
    }
}

extension String {
    package var trimmingSpaces: String { self[...].trimmingSpaces }

    package func replacingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
