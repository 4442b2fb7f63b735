extension CallerTrust {
    /// Programs whose path says nothing of what they run, by basename; `*` at the end matches any
    /// rest (`python3.*` matches `python3.11`). A caller running one never matches silently: an
    /// item trusted to "/usr/bin/python3" would be trusted to every script.
    ///
    /// Shells; script languages and their REPLs; virtual machines that load code named by their
    /// arguments (java, dotnet, mono); editors and debuggers that run scripts or attach to
    /// others; the dynamic loader run as a program (`ld-linux-x86-64.so.2 ./prog` runs any file);
    /// emulators and instrumenters that run a guest program (qemu user mode, valgrind's tools).
    /// `env`, `xargs` and the like are left out: they exec the program, which is then the caller.
    package static let defaultInterpreters: [String] = [
        // Shells (busybox and toybox are shells among their applets).
        "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "yash", "csh", "tcsh", "fish", "busybox", "toybox",
        // Script languages.
        "python", "python2", "python2.*", "python3", "python3.*", "pypy", "pypy3*", "node", "nodejs", "deno", "bun",
        "perl", "perl5*", "ruby", "ruby*", "irb", "irb*", "php", "php*", "lua*", "luajit*", "tclsh*", "wish*", "expect",
        "guile*", "gjs", "cjs", "qjs", "Rscript", "R", "julia", "ocaml", "racket", "sbcl", "clisp", "swipl", "erl",
        "escript", "elixir", "iex", "pwsh", "osascript", "awk", "gawk", "mawk", "nawk",
        // Virtual machines.
        "java", "jshell", "dotnet", "mono",
        // Editors and debuggers.
        "emacs*", "vim*", "nvim", "vi", "gdb", "lldb",
        // Loaders, emulators, instrumenters.
        "ld.so", "ld-linux*", "ld-musl*", "qemu-*", "memcheck-*", "callgrind-*", "valgrind*"
    ]

    /// Whether `name` (a basename) is one of `interpreters`.
    package static func isInterpreter(_ name: String, in interpreters: [String]) -> Bool {
        interpreters.contains { pattern in
            pattern.hasSuffix("*") ? name.hasPrefix(pattern.dropLast()) : name == pattern
        }
    }
}
