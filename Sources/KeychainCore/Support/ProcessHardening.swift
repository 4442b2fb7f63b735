internal import CLinux

package enum ProcessHardening {
    /// Keys in memory stay out of core files and out of reach of ptrace by the user's other
    /// processes; every front end that holds secrets calls this first.
    package static func becomeUndumpable() {
        _ = clinux_set_dumpable(0)
    }
}
