/// The lines ssh-agent prints for `eval`, byte for byte, so that scripts written for it parse ours.
enum ShellOutput {
    static func export(_ name: String, _ value: String, _ shell: AgentOptions.Shell) -> String {
        shell == .csh ? "setenv \(name) \(value);\n" : "\(name)=\(value); export \(name);\n"
    }

    static func unset(_ name: String, _ shell: AgentOptions.Shell) -> String {
        shell == .csh ? "unsetenv \(name);\n" : "unset \(name);\n"
    }

    /// Without -c or -s, ssh-agent writes csh commands when SHELL ends in "csh".
    static func shell(chosen: AgentOptions.Shell?, environment shellPath: String?) -> AgentOptions.Shell {
        if let chosen { return chosen }
        return (shellPath ?? "").hasSuffix("csh") ? .csh : .bourne
    }
}
