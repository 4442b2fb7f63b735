/// The helper's command line, read straight from argv. `CommandLine.arguments` builds its array
/// through the runtime's type-by-name lookup on first use: a tenth of a helper's start-up.
package enum HelperArguments {
    package static var count: Int { Int(CommandLine.argc) }

    /// The action git or docker passes (`get`, `store`, ...), if there is exactly one argument.
    package static var action: String? {
        guard CommandLine.argc == 2, let argument = CommandLine.unsafeArgv[1] else { return nil }
        return String(cString: argument)
    }
}
