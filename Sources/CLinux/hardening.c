#define _GNU_SOURCE
#include "CLinux.h"
#include <errno.h>
#include <stddef.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

int clinux_set_no_new_privs(void) {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

#if defined(__x86_64__)
#define CLINUX_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CLINUX_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

int clinux_deny_tracing(void) {
#ifdef CLINUX_AUDIT_ARCH
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        /* Another architecture's calls (x32, i386 on x86_64) have other numbers: refuse them all. */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLINUX_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        /* x32's calls share x86_64's arch with this bit set: none of them is the broker's. */
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 5, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_kcmp, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog program = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}
