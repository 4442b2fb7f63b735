#define _GNU_SOURCE
#include "CLinux.h"
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

long clinux_add_key(const char *type, const char *description,
                    const void *payload, size_t length, int32_t keyring) {
    return syscall(SYS_add_key, type, description, payload, length, keyring);
}

long clinux_keyctl(int operation, unsigned long arg2, unsigned long arg3,
                   unsigned long arg4, unsigned long arg5) {
    return syscall(SYS_keyctl, operation, arg2, arg3, arg4, arg5);
}

int clinux_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0, 0, 0);
}
