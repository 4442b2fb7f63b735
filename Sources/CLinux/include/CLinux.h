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

#endif
