/* The C side of pam_keychain.so: PAM's five entry points, which hand over to Swift, and what
 * Swift cannot do here: call the variadic pam_syslog, own a cleanup callback that PAM calls after
 * the Swift code has returned, keep the password in memory no Swift value ever copies, and
 * close_range(2). */
#define _GNU_SOURCE
#include "PAMKeychainShim.h"
#include <security/pam_ext.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <fcntl.h>
#include <unistd.h>

#define STASH "pam_keychain_authtok"

/* Implemented in Swift (@_cdecl). */
extern int keychain_pam_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv);
extern int keychain_pam_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv);
extern int keychain_pam_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv);
extern int keychain_pam_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv);
extern int keychain_pam_chauthtok(pam_handle_t *pamh, int flags, int argc, const char **argv);

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    return keychain_pam_authenticate(pamh, flags, argc, argv);
}

PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    return keychain_pam_setcred(pamh, flags, argc, argv);
}

PAM_EXTERN int pam_sm_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    return keychain_pam_open_session(pamh, flags, argc, argv);
}

PAM_EXTERN int pam_sm_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    return keychain_pam_close_session(pamh, flags, argc, argv);
}

PAM_EXTERN int pam_sm_chauthtok(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    return keychain_pam_chauthtok(pamh, flags, argc, argv);
}

void pam_keychain_log(pam_handle_t *pamh, int priority, const char *message) {
    pam_syslog(pamh, priority, "%s", message);
}

/* The password and the user it was checked for, in one allocation. */
struct stash {
    char *user;
    char *token;
    size_t user_size, token_size;
};

static void wipe_stash(pam_handle_t *pamh, void *data, int error_status) {
    (void)pamh;
    (void)error_status;
    struct stash *s = data;
    if (!s) return;
    if (s->token) {
        explicit_bzero(s->token, s->token_size);
        free(s->token);
    }
    if (s->user) {
        explicit_bzero(s->user, s->user_size);
        free(s->user);
    }
    explicit_bzero(s, sizeof *s);
    free(s);
}

static char *copy(const char *text, size_t *size) {
    *size = strlen(text) + 1;
    char *c = malloc(*size);
    if (c) memcpy(c, text, *size);
    return c;
}

int pam_keychain_stash(pam_handle_t *pamh) {
    const void *token = NULL, *user = NULL;
    if (pam_get_item(pamh, PAM_AUTHTOK, &token) != PAM_SUCCESS || !token || !*(const char *)token) return PAM_IGNORE;
    if (pam_get_item(pamh, PAM_USER, &user) != PAM_SUCCESS || !user || !*(const char *)user) return PAM_IGNORE;
    struct stash *s = calloc(1, sizeof *s);
    if (!s) return PAM_BUF_ERR;
    s->token = copy(token, &s->token_size);
    s->user = copy(user, &s->user_size);
    if (!s->token || !s->user) {
        wipe_stash(pamh, s, 0);
        return PAM_BUF_ERR;
    }
    int rc = pam_set_data(pamh, STASH, s, wipe_stash);
    if (rc != PAM_SUCCESS) wipe_stash(pamh, s, 0);
    return rc;
}

const char *pam_keychain_stashed(pam_handle_t *pamh, int *for_other_user) {
    const void *data = NULL, *user = NULL;
    *for_other_user = 0;
    if (pam_get_data(pamh, STASH, &data) != PAM_SUCCESS || !data) return NULL;
    const struct stash *s = data;
    if (pam_get_item(pamh, PAM_USER, &user) != PAM_SUCCESS || !user || strcmp(user, s->user) != 0) {
        *for_other_user = 1;
        return NULL;
    }
    return s->token;
}

void pam_keychain_unstash(pam_handle_t *pamh) {
    /* Replacing the data runs the cleanup of the old value. */
    pam_set_data(pamh, STASH, NULL, NULL);
}

int pam_keychain_isolate_worker(int keep) {
    int first = 3;
    if (keep >= 0) {
        if (keep != 3 && dup2(keep, 3) < 0) return -1;
        /* dup2 clears close-on-exec: without it keychain-tpm-helper, which the worker starts as
         * the user, would hold the reply pipe, and a user's program that opened it through /proc
         * before the helper became undumpable could keep root's reader waiting for ever. */
        if (fcntl(3, F_SETFD, FD_CLOEXEC) < 0) return -1;
        first = 4;
    }
    clearenv();
    if (close_range((unsigned)first, ~0U, 0) == 0) return 0;
    /* Kernels before 5.9: every descriptor up to the limit. */
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = first; fd < (max > 0 ? max : 65536); fd++) close((int)fd);
    return 0;
}

int pam_keychain_pipe(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}
