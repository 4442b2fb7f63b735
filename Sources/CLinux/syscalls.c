#define _GNU_SOURCE
#include "CLinux.h"
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/vfs.h>
#include <unistd.h>

long clinux_add_key(const char *type, const char *description,
                    const void *payload, size_t length, int32_t keyring) {
    return syscall(SYS_add_key, type, description, payload, length, keyring);
}

long clinux_keyctl(int operation, unsigned long arg2, unsigned long arg3,
                   unsigned long arg4, unsigned long arg5) {
    return syscall(SYS_keyctl, operation, arg2, arg3, arg4, arg5);
}

int clinux_pidfd_open(int pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int clinux_pidfd_send_signal(int pidfd, int signal) {
#ifdef SYS_pidfd_send_signal
    return (int)syscall(SYS_pidfd_send_signal, pidfd, signal, NULL, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int clinux_pidfd_pid(int pidfd) {
    /* struct pidfd_info as first published (PIDFD_INFO_SIZE_VER0: 64 bytes); the pid is always
     * filled in. Debian 12's headers predate it. */
    struct {
        uint64_t mask, cgroupid;
        uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
        int32_t exit_code;
    } info;
    _Static_assert(sizeof info == 64, "PIDFD_INFO_SIZE_VER0");
    memset(&info, 0, sizeof info);
    /* _IOWR(PIDFS_IOCTL_MAGIC 0xFF, 11, struct pidfd_info): the size is part of the number. */
    unsigned long request = (3UL << 30) | ((unsigned long)sizeof info << 16) | (0xFFUL << 8) | 11UL;
    if (ioctl(pidfd, request, &info) != 0) return errno == ESRCH ? 0 : -1;
    return (int)info.pid;
}

int clinux_procmap_query_executable(int maps, uint64_t address, uint64_t *end, uint32_t *major, uint32_t *minor,
                                    uint64_t *inode, char *name, uint32_t capacity) {
    /* struct procmap_query (104 bytes); Debian 12's headers predate it. */
    struct {
        uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
        uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
        uint64_t vma_name_addr, build_id_addr;
    } query;
    _Static_assert(sizeof query == 104, "struct procmap_query");
    memset(&query, 0, sizeof query);
    query.size = sizeof query;
    /* PROCMAP_QUERY_VMA_EXECUTABLE | PROCMAP_QUERY_COVERING_OR_NEXT_VMA | PROCMAP_QUERY_FILE_BACKED_VMA */
    query.query_flags = 0x04 | 0x10 | 0x20;
    query.query_addr = address;
    query.vma_name_size = capacity;
    query.vma_name_addr = (uint64_t)(uintptr_t)name;
    /* _IOWR(PROCFS_IOCTL_MAGIC 'f', 17, struct procmap_query) */
    unsigned long request = (3UL << 30) | ((unsigned long)sizeof query << 16) | ((unsigned long)'f' << 8) | 17UL;
    if (ioctl(maps, request, &query) != 0) return -1;
    *end = query.vma_end;
    *major = query.dev_major;
    *minor = query.dev_minor;
    *inode = query.inode;
    return 0;
}

long clinux_filesystem_type(const char *path) {
    struct statfs fs;
    if (statfs(path, &fs) != 0) return -1;
    return (long)(unsigned int)fs.f_type;
}

int clinux_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int clinux_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0, 0, 0);
}

int clinux_limit_malloc_arenas(int arenas) {
    return mallopt(M_ARENA_MAX, arenas);
}

#include <sqlite3.h>

int clinux_sqlite_harden(void *handle) {
    sqlite3 *db = handle;
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
    if (rc == SQLITE_OK) rc = sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)0);
    if (rc == SQLITE_OK) rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)0);
    return rc;
}

/* A server's SIGTERM, SIGINT and SIGHUP: the handler only sets a sig_atomic_t (all a handler may
 * safely touch; a Swift global's accesses are checked for exclusivity, which a handler can trip),
 * and without SA_RESTART a blocked poll(2) returns EINTR so the loop looks at it at once. */
static volatile sig_atomic_t termination_requested;

static void note_termination(int signal_number) {
    (void)signal_number;
    termination_requested = 1;
}

int clinux_catch_termination(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = note_termination;
    sigemptyset(&action.sa_mask);
    const int signals[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (sigaction(signals[i], &action, NULL) != 0) return -1;
    return 0;
}

int clinux_termination_requested(void) { return termination_requested; }

#include <stdlib.h>

const char *clinux_secure_getenv(const char *name) { return secure_getenv(name); }

int clinux_spawn_closefrom(void *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)actions, from);
}

int clinux_open_path(int directory, const char *path, int flags) {
    return openat(directory, path, O_PATH | flags);
}
