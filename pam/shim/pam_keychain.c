/* The C side of pam_keychain.so: PAM's five entry points, which hand over to Swift, and the two
 * things Swift cannot do here (call the variadic pam_syslog, and own a cleanup callback that
 * PAM calls after the Swift code has returned). */
#include "PAMKeychainShim.h"
#include <security/pam_ext.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

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

static void wipe_stash(pam_handle_t *pamh, void *data, int error_status) {
    (void)pamh;
    (void)error_status;
    if (data) {
        explicit_bzero(data, strlen(data));
        free(data);
    }
}

int pam_keychain_stash(pam_handle_t *pamh, const char *token) {
    char *copy = strdup(token);
    if (!copy) return PAM_BUF_ERR;
    int rc = pam_set_data(pamh, STASH, copy, wipe_stash);
    if (rc != PAM_SUCCESS) wipe_stash(pamh, copy, 0);
    return rc;
}

const char *pam_keychain_stashed(pam_handle_t *pamh) {
    const void *data = NULL;
    if (pam_get_data(pamh, STASH, &data) != PAM_SUCCESS) return NULL;
    return data;
}

void pam_keychain_unstash(pam_handle_t *pamh) {
    /* Replacing the data runs the cleanup of the old value. */
    pam_set_data(pamh, STASH, NULL, NULL);
}
