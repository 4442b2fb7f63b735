import CLinux
import Glibc

/// What the broker does to itself before it holds a key: no core files, not dumpable (its /proc
/// files become root's), no_new_privs, and a seccomp filter under which ptrace,
/// process_vm_readv/writev and kcmp fail with EPERM. Its CAP_SYS_PTRACE is for reading callers'
/// /proc files; with it, tracing or reading a root process would make it root-equivalent.
package enum BrokerHardening {
    /// Nil when all took hold, else what failed.
    package static func apply() -> String? {
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        if setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCore) != 0 { return "RLIMIT_CORE: \(String(cString: strerror(errno)))" }
        if clinux_set_dumpable(0) != 0 { return "PR_SET_DUMPABLE: \(String(cString: strerror(errno)))" }
        if clinux_set_no_new_privs() != 0 { return "PR_SET_NO_NEW_PRIVS: \(String(cString: strerror(errno)))" }
        if clinux_deny_tracing() != 0 { return "seccomp: \(String(cString: strerror(errno)))" }
        return nil
    }
}
