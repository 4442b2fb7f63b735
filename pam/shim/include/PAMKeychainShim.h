#ifndef PAM_KEYCHAIN_SHIM_H
#define PAM_KEYCHAIN_SHIM_H
#include <security/pam_modules.h>

/* One line to syslog through pam_syslog, which is variadic and so out of Swift's reach. */
void pam_keychain_log(pam_handle_t *pamh, int priority, const char *message);

/* Keeps a copy of the password for open_session; PAM's cleanup wipes it before freeing it. */
int pam_keychain_stash(pam_handle_t *pamh, const char *token);
/* The stashed password or NULL. */
const char *pam_keychain_stashed(pam_handle_t *pamh);
/* Wipes and drops the stash now. */
void pam_keychain_unstash(pam_handle_t *pamh);

#endif
