#define _GNU_SOURCE
#include "CLinux.h"
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <unistd.h>

long clinux_add_key(const char *type, const char *description,
                    const void *payload, size_t length, int32_t keyring) {
    return syscall(SYS_add_key, type, description, payload, length, keyring);
}

long clinux_keyctl(int operation, unsigned long arg2, unsigned long arg3,
                   unsigned long arg4, unsigned long arg5) {
    return syscall(SYS_keyctl, operation, arg2, arg3, arg4, arg5);
}

int clinux_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int clinux_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0, 0, 0);
}

#include <sqlite3.h>

int clinux_sqlite_harden(void *handle) {
    sqlite3 *db = handle;
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
    if (rc == SQLITE_OK) rc = sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)0);
    if (rc == SQLITE_OK) rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)0);
    return rc;
}
