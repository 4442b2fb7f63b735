#ifndef CLINUX_H
#define CLINUX_H
#include <stddef.h>
#include <stdint.h>

/* keyctl(2) and add_key(2) have no glibc wrappers; syscall(2) is variadic, which Swift cannot call. */
long clinux_add_key(const char *type, const char *description,
                    const void *payload, size_t length, int32_t keyring);
long clinux_keyctl(int operation, unsigned long arg2, unsigned long arg3,
                   unsigned long arg4, unsigned long arg5);

/* prctl(2) is variadic too. Marks the process undumpable so keys in memory stay out of core files. */
int clinux_set_dumpable(int dumpable);

/* mallopt(3)'s M_ARENA_MAX, which Swift's Glibc module does not import: a server with a thread
 * per connection bounds the malloc arenas (and the pages each keeps) to `arenas`. */
int clinux_limit_malloc_arenas(int arenas);

/* sqlite3_db_config(3) is variadic too. Defensive mode (no writable_schema, no shadow-table
 * writes), an untrusted schema (triggers and views may call innocuous functions only) and no
 * extension loading: the PAM worker and every tool parse a file the user controls. Returns 0 on
 * success. `db` is an sqlite3 *. */
int clinux_sqlite_harden(void *db);

/* pipe2(2) is a GNU extension the Swift Glibc module does not export: a pipe whose ends close on
 * exec, so a helper program started at the same moment in another thread inherits neither. */
int clinux_pipe_cloexec(int fds[2]);
/* posix_spawn_file_actions_addclosefrom_np (glibc 2.34), which Swift's Glibc module does not
 * declare: the child closes every descriptor from `from` on. The actions are a
 * posix_spawn_file_actions_t. */
int clinux_spawn_closefrom(void *actions, int from);

/* pidfd_open(2) has no wrapper in this glibc: a descriptor that becomes readable when the process
 * exits, so a wait with a time limit ends at the exit, not at the next tick of a polling loop.
 * -1 (errno set) where the kernel has none (before Linux 5.3). */
int clinux_pidfd_open(int pid);

/* pidfd_send_signal(2): a signal to the process the pidfd names, never to a later one that was
 * given its pid after it was reaped. -1 (errno set) before Linux 5.1. */
int clinux_pidfd_send_signal(int pidfd, int signal);

/* The pid a pidfd names, in this process's pid namespace, by PIDFD_GET_INFO (Linux 6.13): one
 * call, where its fdinfo's Pid: line is an open, two reads and a close. 0 when the process was
 * reaped or is not in this namespace; -1 (errno set) where the kernel has no such ioctl. */
int clinux_pidfd_pid(int pidfd);

/* PROCMAP_QUERY (Linux 6.11) on an open /proc/PID/maps: the first executable, file-backed
 * mapping that covers or follows `address`, its file's device (major, minor), inode and name
 * (as maps shows it, unescaped; `name` gets at most `capacity` bytes with its NUL), and where it
 * ends. 0 when one was found; -1 with errno ENOENT past the last, ENOTTY or EINVAL where the
 * kernel has no such query, another errno on failure. */
int clinux_procmap_query_executable(int maps, uint64_t address, uint64_t *end, uint32_t *major, uint32_t *minor,
                                    uint64_t *inode, char *name, uint32_t capacity);

/* statfs(2)'s f_type (the filesystem's magic number) for `path`, -1 (errno set) when it fails:
 * Swift's Glibc module does not bring <sys/vfs.h>. */
long clinux_filesystem_type(const char *path);

/* SIGTERM, SIGINT and SIGHUP set a flag (a signal handler is C's to write) that
 * clinux_termination_requested() reads; poll(2) is interrupted rather than restarted. Returns 0 on
 * success. */
int clinux_catch_termination(void);
int clinux_termination_requested(void);

/* secure_getenv(3), a GNU extension Swift's Glibc does not export: NULL in a set-user-ID or
 * otherwise privileged process, where the caller chose the environment. */
const char *clinux_secure_getenv(const char *name);

/* SO_PEERCRED's struct ucred needs _GNU_SOURCE, which Swift's Glibc module is not built with: the
 * uid and pid of the process at the other end of a connected Unix socket, as the kernel recorded
 * them at connect(2). Returns 0 on success, -1 (errno set). */
int clinux_peer_credentials(int fd, uint32_t *uid, int32_t *pid);
/// SO_PASSCRED on: every message received on fd then says which process sent it.
int clinux_pass_credentials(int fd);
/// One message into buffer, the pid the kernel recorded as its sender (SCM_CREDENTIALS: the
/// sending process, which no unprivileged process can forge; -1 when none came), and the one
/// descriptor the message carried (SCM_RIGHTS) in passed, -1 when none; a message with more
/// than one, or more than fitted, keeps none and names no sender.
long clinux_receive_with_descriptor(int fd, void *buffer, size_t length, int32_t *sender, int32_t *passed);
/// send(2) of one message carrying the descriptor passed (SCM_RIGHTS), MSG_NOSIGNAL.
long clinux_send_with_descriptor(int fd, const void *buffer, size_t length, int passed);

/* Blocks (or unblocks) SIGTERM, SIGINT and SIGHUP in the calling thread. Around pthread_create, so
 * that the new thread starts with them blocked and they reach the thread that waits for them (a
 * server's accept loop), not one blocked reading a client. */
int clinux_block_termination(int block);

/* openat(2) with O_PATH, which needs _GNU_SOURCE: a descriptor that names a file without opening
 * it (no read permission needed, no side effect of opening a FIFO or a device), for fstat and
 * further openat. `flags` adds O_NOFOLLOW, O_DIRECTORY, O_CLOEXEC. */
int clinux_open_path(int directory, const char *path, int flags);

/* The broker's hardening at start (prctl(2) is variadic): no_new_privs, then a seccomp filter that
 * makes ptrace, process_vm_readv/writev and kcmp fail with EPERM (its CAP_SYS_PTRACE is for
 * reading callers' /proc files, never for tracing or reading their memory). 0 on success. */
int clinux_set_no_new_privs(void);
int clinux_deny_tracing(void);

#endif
